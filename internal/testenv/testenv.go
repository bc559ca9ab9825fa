// Package testenv runs integration tests against a real kube-apiserver and
// etcd (controller-runtime's envtest, using the pinned binaries in bin/k8s)
// with Deckhand's CRDs and webhooks installed.
//
// A test package shares one control plane:
//
//	var env *testenv.Env
//
//	func TestMain(m *testing.M) { testenv.Main(m, &env) }
//
// and each test takes a namespace of its own with env.Namespace(t) and, when
// it needs controllers, a manager with env.StartManager(t, opts).
//
// The control plane ends with the test binary however that ends: a binary
// that panics, is killed or runs out its -timeout never reaches Env.Stop,
// and a guard process then stops etcd and kube-apiserver and removes their
// directories (guard.go).
package testenv

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/deckhand-dev/deckhand/internal/manager"
)

// Env is a running control plane with Deckhand's CRDs and webhook
// configurations installed.
type Env struct {
	// Config reaches the apiserver as a cluster admin.
	Config *rest.Config
	// Client is an uncached client for Config: what it reads is what the
	// apiserver holds right now.
	Client client.Client

	env   *envtest.Environment
	guard *guard
}

// Main starts a control plane, runs the package's tests, stops it, and exits.
func Main(m *testing.M, env **Env) { MainWith(m, env, nil) }

// MainWith is Main with the control plane changed by configure before it
// starts (say, an apiserver flag), when configure is not nil.
func MainWith(m *testing.M, env **Env, configure func(*envtest.Environment)) {
	e, err := StartWith(configure)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		os.Exit(1)
	}
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: stopping: %v\n", err)
	}
	os.Exit(code)
}

// Start brings up etcd and kube-apiserver and installs the CRDs from
// config/crd/bases and the webhooks from config/webhook. envtest gives the
// CRDs of the kinds that convert (a hub and spokes in manager.Scheme:
// PodSet, PodBugger) a conversion webhook pointing at the test webhook
// server, with its CA, so a manager started with ManagerOptions converts
// them as the installed manager does.
func Start() (*Env, error) { return StartWith(nil) }

// StartWith is Start with the control plane changed by configure before it
// starts, when configure is not nil.
func StartWith(configure func(*envtest.Environment)) (*Env, error) {
	logf.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true), zap.Level(logLevel())))
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(root, "bin", "k8s")
	}
	if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
		return nil, fmt.Errorf("no kube-apiserver in %s: run the tests with 'make test' (or 'make k8s-tools' first): %w", assets, err)
	}
	e := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		// envtest waits 10 s for the CRDs to be served by default: too
		// short on a loaded 2-core machine.
		CRDInstallOptions:        envtest.CRDInstallOptions{MaxTime: 2 * time.Minute, PollInterval: 100 * time.Millisecond},
		ControlPlaneStartTimeout: 2 * time.Minute,
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			Paths:                    []string{filepath.Join(root, "config", "webhook")},
			IgnoreErrorIfPathMissing: true,
		},
		Scheme: manager.Scheme,
	}
	// Owner references are checked as OpenShift and hardened clusters check
	// them: setting blockOwnerDeletion needs update on the owner's
	// finalizers, so a missing rule shows here, not on the user's cluster.
	e.ControlPlane.GetAPIServer().Configure().Append("enable-admission-plugins", "OwnerReferencesPermissionEnforcement")
	if configure != nil {
		configure(e)
	}
	cfg, err := e.Start()
	if err != nil {
		// envtest may fail after its processes started (installing CRDs or
		// webhooks): stop them rather than leave them running.
		return nil, errors.Join(fmt.Errorf("starting envtest: %w", err), e.Stop())
	}
	g, err := startGuard([]string{"etcd", "kube-apiserver"}, []string{e.ControlPlane.Etcd.DataDir, e.ControlPlane.APIServer.CertDir})
	if err != nil {
		return nil, errors.Join(err, e.Stop())
	}
	c, err := client.New(cfg, client.Options{Scheme: manager.Scheme})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("creating client: %w", err), e.Stop(), g.release())
	}
	return &Env{Config: cfg, Client: c, env: e, guard: g}, nil
}

// Stop stops the control plane, and its guard with it.
func (e *Env) Stop() error { return errors.Join(e.env.Stop(), e.guard.release()) }

// AdminKubeconfig writes a kubeconfig for a cluster administrator of the
// control plane (system:masters) into a temporary file and returns its path:
// for a manager run as a process of its own.
func (e *Env) AdminKubeconfig(t testing.TB) string {
	t.Helper()
	user, err := e.env.AddUser(envtest.User{Name: "admin-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatalf("adding an envtest user: %v", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		t.Fatalf("writing its kubeconfig: %v", err)
	}
	path := filepath.Join(t.TempDir(), "admin.kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// UserConfig returns a client configuration for a user of the control plane
// named name, in no group but system:authenticated: what it may do is what
// the test binds to it.
func (e *Env) UserConfig(t testing.TB, name string) *rest.Config {
	t.Helper()
	user, err := e.env.AddUser(envtest.User{Name: name}, nil)
	if err != nil {
		t.Fatalf("adding the envtest user %s: %v", name, err)
	}
	return user.Config()
}

// WebhookCA is the CA of the webhook serving certificate envtest issued.
func (e *Env) WebhookCA() []byte { return e.env.WebhookInstallOptions.LocalServingCAData }

// ManagerOptions returns manager options that serve webhooks where envtest
// registered them, with every probe and metrics listener off.
func (e *Env) ManagerOptions() manager.Options {
	w := e.env.WebhookInstallOptions
	return manager.Options{
		MetricsBindAddress:      "0",
		HealthProbeBindAddress:  "0",
		WebhookHost:             w.LocalServingHost, // loopback: nothing off this machine reaches a test's webhooks
		WebhookPort:             w.LocalServingPort,
		WebhookCertDir:          w.LocalServingCertDir,
		WebhookCertMode:         manager.CertModeExternal, // envtest issued them
		LeaderElectionID:        manager.DefaultLeaderElectionID,
		LeaseDuration:           15 * time.Second,
		RenewDeadline:           10 * time.Second,
		RetryPeriod:             2 * time.Second,
		GracefulShutdownTimeout: 10 * time.Second,
		// Each test starts its own manager with the same controllers.
		SkipControllerNameValidation: true,
	}
}

// StartManager runs a manager built from opts until the test ends (or stop
// is called), and fails the test if it stops with an error. When the
// manager serves webhooks it returns once the webhook server answers, so
// that objects the webhooks admit can be created at once.
func (e *Env) StartManager(t testing.TB, opts manager.Options) (mgr ctrl.Manager, stop func()) {
	t.Helper()
	return e.StartManagerWithConfig(t, e.Config, opts)
}

// StartManagerWithConfig is StartManager for a manager that reaches the
// apiserver through cfg, a copy of Config with, say, a transport wrapped to
// count or refuse the manager's requests (test/faults crashes a manager
// after its k-th write that way).
func (e *Env) StartManagerWithConfig(t testing.TB, cfg *rest.Config, opts manager.Options) (mgr ctrl.Manager, stop func()) {
	t.Helper()
	mgr, err := manager.New(context.Background(), cfg, opts)
	if err != nil {
		t.Fatalf("creating manager: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("manager stopped with an error: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	if opts.WebhooksEnabled() {
		serving := mgr.GetWebhookServer().StartedChecker()
		deadline := time.Now().Add(Timeout)
		for serving(nil) != nil {
			if time.Now().After(deadline) {
				t.Fatalf("the webhook server did not start within %s", Timeout)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return mgr, stop
}

// Namespace creates a namespace with a unique name for the test and deletes
// it when the test ends.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	return e.NamespaceWithLabels(t, nil)
}

// NamespaceWithLabels is Namespace with labels on the namespace.
func (e *Env) NamespaceWithLabels(t testing.TB, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-", Labels: labels}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), ns) })
	return ns.Name
}

// RepoRoot finds the repository root: the nearest parent holding go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// logLevel is quiet unless DECKHAND_TEST_VERBOSE is set: the controllers'
// logs are noise when a test passes.
func logLevel() zapcore.Level {
	if os.Getenv("DECKHAND_TEST_VERBOSE") != "" {
		return zapcore.DebugLevel
	}
	return zapcore.ErrorLevel
}

// FreeAddr returns a loopback address with a port nothing listens on, for a
// server the test starts.
//
// The port is drawn below Linux's ephemeral range (32768 and up): a port
// the kernel handed out for 127.0.0.1:0 is handed out again as the local
// port of the next outgoing connection of any process (another package's
// test talking to its apiserver), and the server meant for it then failed
// with "address already in use".
func FreeAddr(t testing.TB) string {
	t.Helper()
	for range 100 {
		addr := fmt.Sprintf("127.0.0.1:%d", freePortLow+rand.IntN(freePortHigh-freePortLow))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		l.Close()
		return addr
	}
	t.Fatalf("no free port in %d-%d on 127.0.0.1", freePortLow, freePortHigh)
	return ""
}

// The ports FreeAddr draws from: below the ephemeral range, above the
// ports services usually take, and apart from the 20000-32000 the local
// cluster's components draw from (hack/cluster.sh).
const freePortLow, freePortHigh = 10000, 20000
