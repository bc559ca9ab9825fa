package webhookcert_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/internal/webhookcert"
)

// replica serves an always-allowing admission webhook with the certificate
// its Rotator writes, reloading it as the manager's webhook server does.
type replica struct {
	rotator *webhookcert.Rotator
	url     string
}

func startReplica(t *testing.T, ctx context.Context, r *webhookcert.Rotator) *replica {
	t.Helper()
	watcher, err := certwatcher.New(filepath.Join(r.CertDir, "tls.crt"), filepath.Join(r.CertDir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	watcher.WithWatchInterval(100 * time.Millisecond)
	go func() { _ = watcher.Start(ctx) }()
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: watcher.GetCertificate, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	allow := &admission.Webhook{Handler: admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
		return admission.Allowed("")
	})}
	srv := &http.Server{Handler: allow, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return &replica{rotator: r, url: fmt.Sprintf("https://%s/validate", l.Addr().(*net.TCPAddr))}
}

// Two replicas serve webhooks; the certificate Secret is deleted, so one
// replica issues a new CA while the other still serves a certificate from
// the old one until its next pass. ConfigMaps created every 100 ms meanwhile
// go through both replicas' webhooks (failurePolicy Fail): not one may fail.
func TestCARotationFailsNoRequest(t *testing.T) {
	g := testenv.NewG(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := env.Namespace(t)

	a, b, cfg := twoReplicas(t, ctx, ns)

	load := startLoad(ctx, ns)
	g.Expect(emptySecret(ctx, ns)).To(Succeed())
	g.Expect(a.Ensure(ctx)).To(Succeed()) // a new CA; b still serves the old one
	time.Sleep(2 * time.Second)
	g.Expect(b.Ensure(ctx)).To(Succeed())
	time.Sleep(2 * time.Second)
	sent, failures := load.stop()
	g.Expect(sent).To(BeNumerically(">", 10))
	g.Expect(failures).To(BeEmpty())

	// Once every replica had time to take the new certificate, the old CA
	// leaves caBundle, and requests still pass.
	a.Now = func() time.Time { return time.Now().Add(10 * time.Minute) }
	g.Expect(a.Ensure(ctx)).To(Succeed())
	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "webhook-cert"}, secret)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg)).To(Succeed())
	for _, w := range cfg.Webhooks {
		g.Expect(w.ClientConfig.CABundle).To(Equal(secret.Data[webhookcert.CAKey]), w.Name)
	}
	g.Eventually(func() error { return createConfigMap(ctx, ns) }).Should(Succeed())
}

// twoReplicas starts two replicas that serve webhooks with the
// certificates their Rotators write, and a validating configuration with
// one webhook for each (failurePolicy Fail), injected by both.
func twoReplicas(t *testing.T, ctx context.Context, ns string) (a, b *webhookcert.Rotator, cfg *admissionregistrationv1.ValidatingWebhookConfiguration) {
	g := testenv.NewG(t)
	cfg = &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{GenerateName: "rotation-"}}
	a, b = rotator(t, ns, ""), rotator(t, ns, "")
	// Certificates for the servers to start with; the configuration comes
	// below.
	a.ValidatingConfigurations, b.ValidatingConfigurations = nil, nil
	g.Expect(a.Ensure(ctx)).To(Succeed())
	g.Expect(b.Ensure(ctx)).To(Succeed())
	replicas := []*replica{startReplica(t, ctx, a), startReplica(t, ctx, b)}
	for i, rep := range replicas {
		cfg.Webhooks = append(cfg.Webhooks, admissionregistrationv1.ValidatingWebhook{
			Name:                    fmt.Sprintf("r%d.rotation.deckhand.dev", i),
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To(rep.url)},
			Rules:                   []admissionregistrationv1.RuleWithOperations{configMapCreates},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
		})
	}
	g.Expect(env.Client.Create(ctx, cfg)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cfg) })
	for _, rep := range replicas {
		rep.rotator.ValidatingConfigurations = []string{cfg.Name}
		g.Expect(rep.rotator.Ensure(ctx)).To(Succeed())
	}
	g.Eventually(func() error { return createConfigMap(ctx, ns) }).Should(Succeed(), "webhooks answer before the rotation")

	return a, b, cfg
}

var configMapCreates = admissionregistrationv1.RuleWithOperations{
	Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
	Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
		Resources: []string{"configmaps"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
}

func createConfigMap(ctx context.Context, ns string) error {
	return env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "load-"}})
}

// load creates a ConfigMap every 100 ms until stopped, and keeps every
// failure.
type load struct {
	cancel   context.CancelFunc
	done     chan struct{}
	mu       sync.Mutex
	sent     int
	failures []string
}

func startLoad(ctx context.Context, ns string) *load {
	ctx, cancel := context.WithCancel(ctx)
	l := &load{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			err := createConfigMap(ctx, ns)
			if errors.Is(err, context.Canceled) {
				return
			}
			l.mu.Lock()
			l.sent++
			if err != nil {
				l.failures = append(l.failures, err.Error())
			}
			l.mu.Unlock()
		}
	}()
	return l
}

func (l *load) stop() (int, []string) {
	l.cancel()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent, l.failures
}

// refusingPatches refuses patches of validating webhook configurations
// while refuse is set: a CA injection that fails.
type refusingPatches struct {
	client.Client
	refuse atomic.Bool
}

func (c *refusingPatches) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if _, ok := obj.(*admissionregistrationv1.ValidatingWebhookConfiguration); ok && c.refuse.Load() {
		return errors.New("fault injection: patch refused")
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

// A new CA whose injection fails at first: the replica that issued it keeps
// serving its old certificate, and once the injection succeeds, ten minutes
// after the CA was issued, the old CA stays in caBundle beside the new one
// for the overlap counted from then, not from the issue: the other replica
// still serves a certificate of the old CA until its next pass.
func TestOldCAStaysUntilTheNewOneWasInjected(t *testing.T) {
	g := testenv.NewG(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := env.Namespace(t)
	a, b, cfg := twoReplicas(t, ctx, ns)
	refusing := &refusingPatches{Client: env.Client}
	a.Client = refusing

	refusing.refuse.Store(true)
	g.Expect(emptySecret(ctx, ns)).To(Succeed())
	g.Expect(a.Ensure(ctx)).NotTo(Succeed(), "the injection was refused")
	g.Consistently(func() error { return createConfigMap(ctx, ns) }).WithTimeout(time.Second).Should(Succeed(),
		"a replica served a certificate whose CA was not injected")

	refusing.refuse.Store(false)
	a.Now = func() time.Time { return time.Now().Add(10 * time.Minute) }
	g.Expect(a.Ensure(ctx)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg)).To(Succeed())
	for _, w := range cfg.Webhooks {
		g.Expect(bytes.Count(w.ClientConfig.CABundle, []byte("BEGIN CERTIFICATE"))).To(Equal(2), "the old CA left caBundle at its injection")
	}
	g.Consistently(func() error { return createConfigMap(ctx, ns) }).WithTimeout(time.Second).Should(Succeed(),
		"the replica that still serves the old CA's certificate")

	// b takes the new certificate; the overlap after the injection ends.
	g.Expect(b.Ensure(ctx)).To(Succeed())
	a.Now = func() time.Time { return time.Now().Add(20 * time.Minute) }
	g.Expect(a.Ensure(ctx)).To(Succeed())
	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "webhook-cert"}, secret)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg)).To(Succeed())
	for _, w := range cfg.Webhooks {
		g.Expect(w.ClientConfig.CABundle).To(Equal(secret.Data[webhookcert.CAKey]), w.Name)
	}
	g.Eventually(func() error { return createConfigMap(ctx, ns) }).Should(Succeed())
}

// A replica whose own injection fails still takes the new certificate once
// another replica put its CA into every caBundle: otherwise that other
// replica, pruning the old CA later, leaves it serving a certificate whose
// CA is gone.
func TestReplicaTakesTheNewCertificateOnceAnotherInjectedItsCA(t *testing.T) {
	g := testenv.NewG(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := env.Namespace(t)
	a, b, _ := twoReplicas(t, ctx, ns)
	refusing := &refusingPatches{Client: env.Client}
	refusing.refuse.Store(true)
	a.Client = refusing

	g.Expect(emptySecret(ctx, ns)).To(Succeed())
	g.Expect(b.Ensure(ctx)).To(Succeed()) // a new CA, in every caBundle beside the old one
	// a would prune the old CA (the overlap is over by its clock) and
	// cannot: the new CA is in every caBundle all the same.
	a.Now = func() time.Time { return time.Now().Add(10 * time.Minute) }
	g.Expect(a.Ensure(ctx)).To(Succeed())
	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "webhook-cert"}, secret)).To(Succeed())
	g.Expect(os.ReadFile(filepath.Join(a.CertDir, webhookcert.CertKey))).To(Equal(secret.Data[webhookcert.CertKey]))
}
