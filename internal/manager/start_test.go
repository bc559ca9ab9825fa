package manager_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/manager"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// restartOptions are the options of a manager that issues its own webhook
// certificate (the installed default), as it restarts: a manager with them
// ran once already, so the certificate Secret holds a CA and a certificate
// for its hosts, and the webhook configuration and the converted CRDs trust
// that CA. The certificate directory is new, as for a new process in the
// bench (a new pod's too). The CRDs' caBundle is put back when the test
// ends: the package's other tests serve envtest's certificate.
func restartOptions(t *testing.T) manager.Options {
	t.Helper()
	opts := env.ManagerOptions()
	opts.WebhookCertMode = manager.CertModeSelfSigned
	opts.Namespace = env.Namespace(t)
	opts.WebhookCertSecret = "deckhand-webhook-server-cert"
	opts.WebhookCertHosts = []string{opts.WebhookHost}
	opts.WebhookCertDir = t.TempDir()
	// The installs ship the Secret empty; the manager fills it.
	env.Create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: opts.Namespace, Name: opts.WebhookCertSecret}})
	keepCABundles(t, manager.ConvertedCRDs()...)
	installWebhookConfiguration(t, opts.WebhookHost, opts.WebhookPort)

	_, stop := env.StartManager(t, opts)
	stop()
	opts.WebhookCertDir = t.TempDir()
	return opts
}

// keepCABundles puts the conversion caBundle of the named CRDs back as it
// is now when the test ends.
func keepCABundles(t *testing.T, crds ...string) {
	t.Helper()
	ctx := context.Background()
	for _, name := range crds {
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			t.Fatal(err)
		}
		bundle, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "caBundle")
		patch, err := json.Marshal(map[string]any{"spec": map[string]any{"conversion": map[string]any{"webhook": map[string]any{
			"clientConfig": map[string]any{"caBundle": bundle}}}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := env.Client.Patch(ctx, crd, client.RawPatch(types.MergePatchType, patch)); err != nil {
				t.Errorf("putting back the caBundle of CRD %s: %v", name, err)
			}
		})
	}
}

// installWebhookConfiguration installs the webhook configuration the
// self-signed mode injects its CA into, as an install does (envtest's has
// another name), with webhooks that match nothing: only its caBundle is
// under test.
func installWebhookConfiguration(t *testing.T, host string, port int) {
	t.Helper()
	ctx := context.Background()
	hook := func(name string) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{
			Name: name,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				URL: ptr.To("https://" + net.JoinHostPort(host, strconv.Itoa(port)) + "/" + name)},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"nothing.deckhand.dev"}, APIVersions: []string{"v1"},
					Resources: []string{"nothings"}},
			}},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
		}
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: manager.ValidatingWebhookConfiguration},
		Webhooks:   []admissionregistrationv1.ValidatingWebhook{hook("a.deckhand.dev"), hook("b.deckhand.dev")},
	}
	if err := env.Client.Create(ctx, cfg); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, cfg) })
}

// At a restart the caches list while the certificate is checked, not after
// it: the first pass of the rotator reads the certificate Secret and the
// converted CRDs back (the PodSet CRD is over a megabyte), which held up
// every controller's first list. Here the Secret's read is held until a
// list has been sent: a manager that checked the certificate before its
// caches started would send no list meanwhile. Until the check is done, the
// webhook server presents no certificate; then the one the Secret's CA
// signed, for its host; and the Secret is not rewritten.
func TestCachesListWhileTheCertificateIsChecked(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	opts := restartOptions(t)
	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: opts.Namespace, Name: opts.WebhookCertSecret}, secret)).To(Succeed())
	secretPath := "/api/v1/namespaces/" + opts.Namespace + "/secrets/" + opts.WebhookCertSecret

	var once sync.Once
	listed := make(chan struct{})
	var handshakeWhileHeld error
	log := &startLog{}
	log.hold = func(req *http.Request) {
		switch {
		case verbOf(req) == "LIST":
			once.Do(func() { close(listed) })
		case req.Method == http.MethodGet && req.URL.Path == secretPath:
			select {
			case <-listed:
			case <-time.After(5 * time.Second):
			}
			// Once the webhook server listens, it still presents nothing.
			handshakeWhileHeld = handshakeOnceListening(opts)
		}
	}
	env.StartManagerWithConfig(t, log.config(env.Config), opts)
	t.Logf("requests of the restart (ms after manager.New: sent, answered):\n%s", log)

	var firstList, secretRead *request
	entries := log.snapshot()
	for i := range entries {
		switch e := &entries[i]; {
		case firstList == nil && e.verb == "LIST":
			firstList = e
		case secretRead == nil && e.verb == "GET" && e.path == secretPath:
			secretRead = e
		}
	}
	g.Expect(firstList).NotTo(BeNil())
	g.Expect(secretRead).NotTo(BeNil())
	g.Expect(firstList.sent).To(BeNumerically("<", secretRead.done),
		"the caches listed only once the certificate Secret had been read")
	g.Expect(handshakeWhileHeld).To(HaveOccurred(), "the webhook server presented a certificate before its CA was checked")

	roots := x509.NewCertPool()
	g.Expect(roots.AppendCertsFromPEM(secret.Data["ca.crt"])).To(BeTrue())
	g.Expect(handshake(opts, roots)).To(Succeed())
	after := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(secret), after)).To(Succeed())
	g.Expect(after.ResourceVersion).To(Equal(secret.ResourceVersion), "a good certificate was rewritten")
}

// handshakeOnceListening waits up to 5 s for the webhook server of opts to
// listen, then tries a TLS handshake with it (handshake).
func handshakeOnceListening(opts manager.Options) error {
	addr := net.JoinHostPort(opts.WebhookHost, strconv.Itoa(opts.WebhookPort))
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if conn, err := net.Dial("tcp", addr); err == nil {
			_ = conn.Close()
			break
		}
	}
	return handshake(opts, nil)
}

// handshake completes a TLS handshake with the webhook server, verifying
// its certificate for the webhook host against roots (not at all when nil).
func handshake(opts manager.Options, roots *x509.CertPool) error {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp",
		net.JoinHostPort(opts.WebhookHost, strconv.Itoa(opts.WebhookPort)),
		&tls.Config{RootCAs: roots, ServerName: opts.WebhookHost, InsecureSkipVerify: roots == nil}) // only whether one is presented
	if err != nil {
		return err
	}
	return conn.Close()
}

// The certificate's client shares the manager's RESTMapper: a start asks
// the apiserver for its API groups once, not once more for the three kinds
// the certificate touches (Secret, webhook configuration, CRD), which the
// mapper NewManager filled knows already.
func TestStartDiscoversTheAPIOnce(t *testing.T) {
	g := NewWithT(t)
	opts := restartOptions(t)
	log := &startLog{}
	mgr, _ := env.StartManagerWithConfig(t, log.config(env.Config), opts)
	g.Expect(mgr.GetCache().WaitForCacheSync(context.Background())).To(BeTrue())
	discovery := map[string]int{}
	for _, e := range log.snapshot() {
		if e.path == "/api" || e.path == "/apis" {
			discovery[e.path]++
		}
	}
	g.Expect(discovery).To(Equal(map[string]int{"/api": 1, "/apis": 1}), "requests:\n%s", log)
}

// A certificate that cannot be issued (here: the certificate Secret, which
// the installs ship and the manager may not create, is missing) stops the
// manager with the reason, naming the Secret, as it stopped New when New
// issued it: a replica never runs on without a certificate, and does not
// crash either.
func TestAManagerWithoutACertificateStops(t *testing.T) {
	g := NewWithT(t)
	opts := env.ManagerOptions()
	opts.WebhookCertMode = manager.CertModeSelfSigned
	opts.Namespace = env.Namespace(t)
	opts.WebhookCertSecret = "deckhand-webhook-server-cert"
	opts.WebhookCertHosts = []string{opts.WebhookHost}
	opts.WebhookCertDir = t.TempDir()
	mgr, err := manager.New(context.Background(), env.Config, opts)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout)
		defer cancel()
		err = mgr.Start(ctx)
		g.Expect(ctx.Err()).NotTo(HaveOccurred(), "the manager ran on")
	}
	g.Expect(err).To(MatchError(ContainSubstring("issuing the webhook serving certificate")))
	g.Expect(err).To(MatchError(ContainSubstring("Secret " + opts.Namespace + "/deckhand-webhook-server-cert is missing")))
	g.Expect(apierrors.IsNotFound(env.Client.Get(context.Background(),
		client.ObjectKey{Namespace: opts.Namespace, Name: opts.WebhookCertSecret}, &corev1.Secret{}))).To(BeTrue(), "the manager created its Secret")
}
