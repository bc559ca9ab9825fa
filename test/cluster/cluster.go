// Package cluster gives end-to-end tests a local Kubernetes cluster (the
// pinned control plane with kwok nodes and, where the machine allows it, one
// real node, started by hack/cluster.sh) and the Deckhand manager running
// against it as a real process.
//
//	var c *cluster.Cluster
//
//	func TestMain(m *testing.M) { cluster.Main(m, &c, 3) }
//
// Each test then takes a namespace with c.Namespace(t) and, if it needs
// the operator, runs it with c.RunManager(t). A test whose pods must really
// run takes c.RealNodeNamespace(t) instead; it skips, saying why, on a
// machine without a real node.
package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/localwebhooks"
	"github.com/deckhand-dev/deckhand/internal/manager"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// Namespace is where the install puts the manager, its Lease and its
// webhook certificate; ServiceAccount is the manager's identity.
const (
	Namespace      = "deckhand-system"
	ServiceAccount = "deckhand-controller-manager"
)

// Cluster is a running local cluster.
type Cluster struct {
	Name       string
	Kubeconfig string
	Config     *rest.Config
	// Client reads straight from the apiserver (no cache).
	Client    client.Client
	Clientset kubernetes.Interface
	// ManagerKubeconfig authenticates as the installed manager
	// ServiceAccount.
	ManagerKubeconfig string
	// BeforeManagerStart, when set, is called by RunManager just before it
	// starts the manager's process, after it installed the webhook
	// configurations: the bench takes its CPU marks there.
	BeforeManagerStart func()

	root string
	// realNode is the real node's name; noRealNode says why there is none.
	realNode, noRealNode string
}

// Main starts a fresh cluster with the given number of nodes, installs
// Deckhand from dist/install.yaml, runs the package's tests, removes the
// cluster, and exits.
func Main(m *testing.M, c **Cluster, nodes int) {
	MainWithInstall(m, c, nodes, nil)
}

// MainWithInstall is Main with Deckhand installed by install instead of
// from dist/install.yaml (nil): an older release, for an upgrade test.
func MainWithInstall(m *testing.M, c **Cluster, nodes int, install func(*Cluster) error) {
	removeOrphans()
	cl, err := StartWithInstall(fmt.Sprintf("deckhand-e2e-%d", os.Getpid()), nodes, install)
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		os.Exit(1)
	}
	*c = cl
	if cl.realNode != "" {
		fmt.Fprintf(os.Stderr, "e2e: real node %s is Ready beside the kwok nodes\n", cl.realNode)
	} else {
		fmt.Fprintf(os.Stderr, "e2e: no real node (%s): the tests that need one skip\n", cl.noRealNode)
	}
	code := m.Run()
	if err := cl.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: removing cluster: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// removeOrphans removes e2e clusters whose test process is gone (killed by
// a timeout or a signal before it could clean up), so their control planes
// do not keep running.
func removeOrphans() {
	root, err := testenv.RepoRoot()
	if err != nil {
		return
	}
	dirs, _ := filepath.Glob(filepath.Join(root, "bin", "kwok", "clusters", "deckhand-e2e-*"))
	for _, dir := range dirs {
		name := filepath.Base(dir)
		pid := strings.TrimPrefix(name, "deckhand-e2e-")
		if _, err := os.Stat(filepath.Join("/proc", pid)); err == nil {
			continue // its test run is still going
		}
		c := &Cluster{Name: name, root: root, Kubeconfig: filepath.Join(root, "bin", "e2e", name+".kubeconfig")}
		if err := c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: removing orphaned cluster %s: %v\n", name, err)
		}
	}
}

// Start brings up a cluster named name with nodes Ready nodes and installs
// Deckhand as a user would, from dist/install.yaml (`make build-installer`):
// CRDs, the ServiceAccount and its RBAC, webhooks, the manager Deployment.
// Managers started with RunManager authenticate as that ServiceAccount, so
// every e2e test also proves the shipped RBAC is enough.
func Start(name string, nodes int) (*Cluster, error) {
	return StartWithInstall(name, nodes, nil)
}

// InstallFile installs Deckhand from a multi-document YAML file: an
// install.yaml (Cluster.Install).
func InstallFile(path string) func(*Cluster) error {
	return func(c *Cluster) error { return c.Install(path) }
}

// StartWithInstall is Start with Deckhand installed by install; nil is
// InstallFile(dist/install.yaml). install must leave the manager's
// ServiceAccount in Namespace and call WriteManagerKubeconfig.
func StartWithInstall(name string, nodes int, install func(*Cluster) error) (*Cluster, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	c := &Cluster{Name: name, root: root, Kubeconfig: filepath.Join(root, "bin", "e2e", name+".kubeconfig")}
	if out, err := c.clusterScript("up", name, c.Kubeconfig, fmt.Sprint(nodes)); err != nil {
		return nil, errors.Join(fmt.Errorf("starting cluster: %w\n%s", err, out), c.Stop())
	}
	if c.Config, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	c.Config.QPS, c.Config.Burst = 200, 400
	if c.Client, err = client.New(c.Config, client.Options{Scheme: manager.Scheme}); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	if c.Clientset, err = kubernetes.NewForConfig(c.Config); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	if err := c.findRealNode(context.Background()); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	if install == nil {
		install = InstallFile(filepath.Join(c.root, "dist", "install.yaml"))
	}
	if err := install(c); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	return c, nil
}

// Stop removes the cluster, with its real node's kubelet, containerd,
// containers and their state.
func (c *Cluster) Stop() error {
	out, err := c.clusterScript("down", c.Name, c.Kubeconfig)
	if err != nil {
		return fmt.Errorf("%w\n%s", err, out)
	}
	return nil
}

// Install applies installer (dist/install.yaml, or an older release's),
// waits for the CRDs, and writes a kubeconfig that authenticates as the
// manager's ServiceAccount. Applied over an older install, it is the
// upgrade the README describes.
func (c *Cluster) Install(installer string) error {
	manifests, err := os.ReadFile(installer)
	if err != nil {
		return fmt.Errorf("%w: run 'make build-installer' (make test-e2e does)", err)
	}
	if _, err := c.Kubectl("apply", "--server-side", "--force-conflicts", "-f", installer); err != nil {
		return err
	}
	if bytes.Contains(manifests, []byte("kind: CustomResourceDefinition")) {
		if err := c.WaitForCRDs(time.Minute); err != nil {
			return err
		}
	}
	return c.WriteManagerKubeconfig()
}

// WriteManagerKubeconfig writes ManagerKubeconfig: a kubeconfig that
// authenticates as the installed manager's ServiceAccount.
func (c *Cluster) WriteManagerKubeconfig() error {
	path := strings.TrimSuffix(c.Kubeconfig, ".kubeconfig") + ".manager.kubeconfig"
	if err := c.WriteKubeconfigFor(Namespace, ServiceAccount, path); err != nil {
		return err
	}
	c.ManagerKubeconfig = path
	return nil
}

// WriteKubeconfigFor writes to path a kubeconfig that authenticates as the
// ServiceAccount namespace/name.
func (c *Cluster) WriteKubeconfigFor(namespace, account, path string) error {
	ctx := context.Background()
	tr, err := c.Clientset.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, account,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)}},
		metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("requesting a token for %s/%s: %w", namespace, account, err)
	}
	admin, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		return err
	}
	cluster := admin.Clusters[admin.Contexts[admin.CurrentContext].Cluster]
	cfg := clientcmdapi.NewConfig()
	const name = "deckhand"
	cfg.Clusters[name] = cluster
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	cfg.CurrentContext = name
	return clientcmd.WriteToFile(*cfg, path)
}

// WaitForCRDs waits until every Deckhand CRD is Established. (kubectl wait
// right after apply can fail on a CRD that has no conditions yet.)
func (c *Cluster) WaitForCRDs(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		crds := &unstructured.UnstructuredList{}
		crds.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinitionList"))
		err := c.Client.List(context.Background(), crds, client.MatchingLabels{"app.kubernetes.io/part-of": "deckhand"})
		if err == nil {
			pending := 0
			for _, crd := range crds.Items {
				if !established(crd) {
					pending++
				}
			}
			if len(crds.Items) > 0 && pending == 0 {
				return nil
			}
			err = fmt.Errorf("%d of %d Deckhand CRDs not established", pending, len(crds.Items))
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func established(crd unstructured.Unstructured) bool {
	conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, cond := range conditions {
		if m, ok := cond.(map[string]any); ok && m["type"] == string(apiextensionsv1.Established) && m["status"] == "True" {
			return true
		}
	}
	return false
}

// clusterScript runs hack/cluster.sh with args.
func (c *Cluster) clusterScript(args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(c.root, "hack", "cluster.sh"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	return cmd.CombinedOutput()
}

// Kubectl runs the project's kubectl against the cluster and returns its
// standard output; a failure carries the standard error.
func (c *Cluster) Kubectl(args ...string) (string, error) {
	return c.KubectlWithin(0, args...)
}

// KubectlWithin is Kubectl killed after timeout (none if 0): for commands
// such as exec and logs that wait on a node.
func (c *Cluster) KubectlWithin(timeout time.Duration, args ...string) (string, error) {
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, filepath.Join(c.root, "bin", "k8s", "kubectl"), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// Namespace creates a namespace with a unique name (and the given labels)
// and deletes it, with everything in it, when the test ends.
func (c *Cluster) Namespace(t testing.TB, labels map[string]string) string {
	t.Helper()
	return c.createNamespace(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-", Labels: labels}})
}

// createNamespace creates ns, deletes it when the test ends, and returns
// once its default ServiceAccount exists: until the controller-manager has
// made it, the apiserver refuses every pod created there ("error looking up
// service account"), and after an apiserver or etcd restart that can take
// seconds.
func (c *Cluster) createNamespace(t testing.TB, ns *corev1.Namespace) string {
	t.Helper()
	ctx := context.Background()
	if err := c.Client.Create(ctx, ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), ns) })
	deadline := time.Now().Add(time.Minute)
	for {
		err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "default"}, &corev1.ServiceAccount{})
		if err == nil {
			return ns.Name
		}
		if time.Now().After(deadline) {
			t.Fatalf("namespace %s has no default ServiceAccount a minute after its creation: %v", ns.Name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Process is a Deckhand manager running as a child process.
type Process struct {
	cmd     *exec.Cmd
	started time.Time
	mu      sync.Mutex
	logs    bytes.Buffer
	done    chan struct{}
}

// RunManager starts the manager binary (DECKHAND_BIN, default bin/deckhand)
// against the cluster with the given extra flags, authenticated as the
// installed ServiceAccount, and stops it when the test ends. It returns once
// /readyz answers 200. Its logs are printed if the test fails.
func (c *Cluster) RunManager(t testing.TB, args ...string) *Process {
	t.Helper()
	bin := os.Getenv("DECKHAND_BIN")
	if bin == "" {
		bin = filepath.Join(c.root, "bin", "deckhand")
	}
	return c.RunManagerFrom(t, bin, filepath.Join(c.root, "config", "webhook", "manifests.yaml"), args...)
}

// RunManagerFrom is RunManager with another manager binary and the webhook
// configurations it serves (controller-gen's manifests of its release): an
// older release, for an upgrade test.
func (c *Cluster) RunManagerFrom(t testing.TB, bin, webhookManifests string, args ...string) *Process {
	t.Helper()
	port := c.installWebhooks(t, webhookManifests)
	health := testenv.FreeAddr(t)
	flags := slices.Concat([]string{
		"--kubeconfig", c.ManagerKubeconfig,
		"--namespace", Namespace,
		"--metrics-bind-address", "0",
		"--health-probe-bind-address", health,
		"--webhook-host", "127.0.0.1",
		"--webhook-port", fmt.Sprint(port),
		"--webhook-cert-dir", t.TempDir(),
		"--webhook-cert-hosts", "127.0.0.1",
		"--zap-log-level", "debug",
	}, args)
	p := &Process{cmd: exec.Command(bin, flags...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if c.BeforeManagerStart != nil {
		c.BeforeManagerStart()
	}
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("manager logs:\n%s", p.Logs())
		}
	})
	if err := p.waitReady("http://"+health+"/readyz", 2*time.Minute); err != nil {
		t.Fatalf("manager did not become ready: %v\n%s", err, p.Logs())
	}
	return p
}

// waitReady polls url until it answers 200, the process exits, or timeout.
func (p *Process) waitReady(url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := hc.Get(url)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s answered %s", url, resp.Status)
		}
		if p.Exited() {
			return errors.New("the manager exited")
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// installWebhooks points the cluster's webhook configurations at a free
// loopback port and returns it; the manager then issues its certificate and
// injects the CA (self-signed mode).
func (c *Cluster) installWebhooks(t testing.TB, webhookManifests string) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	manifests, err := os.ReadFile(webhookManifests)
	if errors.Is(err, os.ErrNotExist) {
		return port
	} else if err != nil {
		t.Fatal(err)
	}
	if err := localwebhooks.Install(context.Background(), c.Client, manifests, "127.0.0.1", port); err != nil {
		t.Fatalf("installing webhooks: %v", err)
	}
	return port
}

// Write collects the process's output.
func (p *Process) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.Write(b)
}

// Logs returns everything the process printed so far.
func (p *Process) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// Stop asks the process to shut down gracefully, and kills it if it has not
// within 30 seconds.
func (p *Process) Stop() {
	if p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Started is when the process was started: after the webhook
// configurations were installed, which a restart of an installed manager
// does not do.
func (p *Process) Started() time.Time { return p.started }

// Pid is the process's id, for reading its /proc entries.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}
