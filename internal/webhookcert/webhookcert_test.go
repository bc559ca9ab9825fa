package webhookcert_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/internal/webhookcert"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// webhookConfig creates a validating configuration with two webhooks and no
// caBundle, as an install leaves it.
func webhookConfig(t *testing.T) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	hook := func(name string) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{
			Name:                    name,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/" + name)},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
		}
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "certtest-"},
		Webhooks:   []admissionregistrationv1.ValidatingWebhook{hook("a.deckhand.dev"), hook("b.deckhand.dev")},
	}
	if err := env.Client.Create(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cfg) })
	return cfg
}

func rotator(t *testing.T, ns, cfgName string) *webhookcert.Rotator {
	shipSecret(t, ns)
	return &webhookcert.Rotator{
		Client:                   env.Client,
		SecretNamespace:          ns,
		SecretName:               "webhook-cert",
		Hosts:                    []string{"deckhand-webhook-service." + ns + ".svc", "127.0.0.1"},
		CertDir:                  t.TempDir(),
		ValidatingConfigurations: []string{cfgName},
		MutatingConfigurations:   []string{"does-not-exist"},
	}
}

// shipSecret creates the certificate Secret empty, as both installs ship
// it, unless it exists.
func shipSecret(t *testing.T, ns string) {
	t.Helper()
	err := env.Client.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "webhook-cert"}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// emptySecret empties the certificate Secret, as an install re-applied
// from scratch or an administrator would: the next pass issues a new CA.
func emptySecret(ctx context.Context, ns string) error {
	secret := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "webhook-cert"}, secret); err != nil {
		return err
	}
	secret.Data = nil
	return env.Client.Update(ctx, secret)
}

func TestEnsureIssuesWritesAndInjects(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	cfg := webhookConfig(t)
	r := rotator(t, ns, cfg.Name)

	g.Expect(r.Ensure(ctx)).To(Succeed())

	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "webhook-cert"}, secret)).To(Succeed())
	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(secret.Data[webhookcert.CAKey])).To(BeTrue())

	// The files the webhook server reads form a pair the CA vouches for, for
	// every host.
	pair, err := tls.LoadX509KeyPair(filepath.Join(r.CertDir, "tls.crt"), filepath.Join(r.CertDir, "tls.key"))
	g.Expect(err).NotTo(HaveOccurred())
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	g.Expect(err).NotTo(HaveOccurred())
	for _, h := range r.Hosts {
		_, err := leaf.Verify(x509.VerifyOptions{DNSName: h, Roots: pool})
		g.Expect(err).NotTo(HaveOccurred(), h)
	}

	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg)).To(Succeed())
	for _, w := range cfg.Webhooks {
		g.Expect(w.ClientConfig.CABundle).To(Equal(secret.Data[webhookcert.CAKey]), w.Name)
	}

	// A second pass with nothing to do writes nothing.
	secretRV, cfgRV := secret.ResourceVersion, cfg.ResourceVersion
	g.Expect(r.Ensure(ctx)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg)).To(Succeed())
	g.Expect(secret.ResourceVersion).To(Equal(secretRV))
	g.Expect(cfg.ResourceVersion).To(Equal(cfgRV))
}

func TestRenewalKeepsTheCA(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	cfg := webhookConfig(t)
	r := rotator(t, ns, cfg.Name)
	g.Expect(r.Ensure(ctx)).To(Succeed())
	before, err := os.ReadFile(filepath.Join(r.CertDir, "tls.crt"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg)).To(Succeed())
	caBefore := cfg.Webhooks[0].ClientConfig.CABundle

	// Eleven months on, the serving certificate is close to expiry.
	r.Now = func() time.Time { return time.Now().Add(330 * 24 * time.Hour) }
	g.Expect(r.Ensure(ctx)).To(Succeed())

	after, err := os.ReadFile(filepath.Join(r.CertDir, "tls.crt"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after).NotTo(Equal(before), "serving certificate renewed")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg)).To(Succeed())
	g.Expect(cfg.Webhooks[0].ClientConfig.CABundle).To(Equal(caBefore), "caBundle unchanged")
}

func TestNewHostReissues(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	cfg := webhookConfig(t)
	r := rotator(t, ns, cfg.Name)
	g.Expect(r.Ensure(ctx)).To(Succeed())

	r.Hosts = append(r.Hosts, "deckhand.example.com")
	g.Expect(r.Ensure(ctx)).To(Succeed())
	pair, err := tls.LoadX509KeyPair(filepath.Join(r.CertDir, "tls.crt"), filepath.Join(r.CertDir, "tls.key"))
	g.Expect(err).NotTo(HaveOccurred())
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(leaf.VerifyHostname("deckhand.example.com")).To(Succeed())
}

func TestReplicasRacingAgreeOnOneCertificate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	cfg := webhookConfig(t)
	replicas := []*webhookcert.Rotator{rotator(t, ns, cfg.Name), rotator(t, ns, cfg.Name), rotator(t, ns, cfg.Name)}

	var wg sync.WaitGroup
	errs := make([]error, len(replicas))
	for i, r := range replicas {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = r.Ensure(ctx) }()
	}
	wg.Wait()
	for _, err := range errs {
		g.Expect(err).NotTo(HaveOccurred())
	}
	want, err := os.ReadFile(filepath.Join(replicas[0].CertDir, "tls.crt"))
	g.Expect(err).NotTo(HaveOccurred())
	for _, r := range replicas[1:] {
		g.Expect(os.ReadFile(filepath.Join(r.CertDir, "tls.crt"))).To(Equal(want))
	}
	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "webhook-cert"}, secret)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg)).To(Succeed())
	g.Expect(cfg.Webhooks[1].ClientConfig.CABundle).To(Equal(secret.Data[webhookcert.CAKey]))
}

// conversionCRD creates a CRD with two versions converted by a webhook with
// no caBundle, as an install leaves it.
func conversionCRD(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	crd := &unstructured.Unstructured{}
	err := yaml.Unmarshal([]byte(`
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.certtest.deckhand.dev}
spec:
  group: certtest.deckhand.dev
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig: {url: "https://127.0.0.1:1/convert"}
  versions:
  - {name: v1beta1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}
  - {name: v1alpha1, served: true, storage: false, schema: {openAPIV3Schema: {type: object}}}
`), &crd.Object)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(context.Background(), crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), crd) })
	return crd
}

// A CRD's conversion webhook is called by the apiserver like an admission
// webhook, so it must trust the same CA; a CRD that is missing is skipped.
func TestEnsureInjectsIntoCRDConversionWebhooks(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	crd := conversionCRD(t)
	r := rotator(t, ns, "does-not-exist")
	r.CRDs = []string{crd.GetName(), "missing.certtest.deckhand.dev"}

	g.Expect(r.Ensure(ctx)).To(Succeed())

	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "webhook-cert"}, secret)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(crd), crd)).To(Succeed())
	bundle, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "caBundle")
	g.Expect(base64.StdEncoding.DecodeString(bundle)).To(Equal(secret.Data[webhookcert.CAKey]))
	url, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "url")
	g.Expect(url).To(Equal("https://127.0.0.1:1/convert"), "only caBundle changes")

	// A second pass with nothing to do writes nothing.
	rv := crd.GetResourceVersion()
	g.Expect(r.Ensure(ctx)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(crd), crd)).To(Succeed())
	g.Expect(crd.GetResourceVersion()).To(Equal(rv))
}

// deckhand_webhook_certificate_expiry_timestamp_seconds is the expiry of
// the certificate being served, and follows a renewal.
func TestExpiryGaugeFollowsTheServedCertificate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	r := rotator(t, ns, webhookConfig(t).Name)
	g.Expect(r.Ensure(ctx)).To(Succeed())
	webhookcert.ReportExpiry(r.CertDir)
	notAfter := func() float64 {
		pair, err := tls.LoadX509KeyPair(filepath.Join(r.CertDir, "tls.crt"), filepath.Join(r.CertDir, "tls.key"))
		g.Expect(err).NotTo(HaveOccurred())
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		g.Expect(err).NotTo(HaveOccurred())
		return float64(leaf.NotAfter.Unix())
	}
	gauge := func() (float64, error) {
		return testenv.Metric("deckhand_webhook_certificate_expiry_timestamp_seconds", nil)
	}
	first := notAfter()
	g.Expect(gauge()).To(Equal(first))

	r.Now = func() time.Time { return time.Now().Add(330 * 24 * time.Hour) }
	g.Expect(r.Ensure(ctx)).To(Succeed())
	g.Expect(notAfter()).To(BeNumerically(">", first))
	g.Expect(gauge()).To(Equal(notAfter()))
}

// A certificate that is not valid yet (issued by a clock running ahead, or
// written by hand) is replaced, CA and all, rather than kept until it
// expires while every handshake fails.
func TestACertificateNotYetValidIsReplaced(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	cfg := webhookConfig(t)
	ahead := rotator(t, ns, cfg.Name)
	ahead.Now = func() time.Time { return time.Now().Add(30 * 24 * time.Hour) }
	g.Expect(ahead.Ensure(ctx)).To(Succeed())

	r := rotator(t, ns, cfg.Name)
	g.Expect(r.Ensure(ctx)).To(Succeed())
	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "webhook-cert"}, secret)).To(Succeed())
	for _, k := range []string{webhookcert.CAKey, webhookcert.CertKey} {
		block, _ := pem.Decode(secret.Data[k])
		g.Expect(block).NotTo(BeNil(), k)
		cert, err := x509.ParseCertificate(block.Bytes)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cert.NotBefore).To(BeTemporally("<=", time.Now()), k+" valid now")
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(r.CertDir, "tls.crt"), filepath.Join(r.CertDir, "tls.key"))
	g.Expect(err).NotTo(HaveOccurred())
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(leaf.NotBefore).To(BeTemporally("<=", time.Now()), "the served certificate is valid now")
}

// The manager never creates its certificate Secret (it has no right to:
// create cannot be limited by name, and a manager that may create Secrets
// can mint ServiceAccount tokens): the installs ship it empty. Missing, a
// pass fails naming it and creates nothing; empty (the installs' Opaque
// one, with what Helm puts on it), it is filled, its type and metadata
// kept; filled by an earlier release (kubernetes.io/tls, created by that
// release's manager), it is used as it is, nothing rewritten.
func TestTheShippedSecretIsFilledNeverCreated(t *testing.T) {
	ctx := context.Background()

	t.Run("missing", func(t *testing.T) {
		g := NewWithT(t)
		ns := env.Namespace(t)
		r := &webhookcert.Rotator{Client: env.Client, SecretNamespace: ns, SecretName: "webhook-cert",
			Hosts: []string{"127.0.0.1"}, CertDir: t.TempDir()}
		err := r.Ensure(ctx)
		g.Expect(err).To(MatchError(webhookcert.ErrNoSecret))
		g.Expect(err.Error()).To(ContainSubstring("Secret " + ns + "/webhook-cert is missing"))
		err = env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "webhook-cert"}, &corev1.Secret{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the rotator created the Secret: %v", err)
		// Start, as the manager runs it, stops with that error.
		g.Expect(r.Start(ctx)).To(MatchError(ContainSubstring("Secret " + ns + "/webhook-cert is missing")))
		_, err = r.GetCertificate(nil)
		g.Expect(err).To(MatchError(webhookcert.ErrNotIssued))
	})

	t.Run("empty", func(t *testing.T) {
		g := NewWithT(t)
		ns := env.Namespace(t)
		shipped := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "webhook-cert",
			Labels:      map[string]string{"app.kubernetes.io/managed-by": "Helm"},
			Annotations: map[string]string{"meta.helm.sh/release-name": "deckhand"}}}
		g.Expect(env.Client.Create(ctx, shipped)).To(Succeed())
		r := rotator(t, ns, webhookConfig(t).Name)
		g.Expect(r.Ensure(ctx)).To(Succeed())
		secret := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(shipped), secret)).To(Succeed())
		g.Expect(secret.Type).To(Equal(corev1.SecretTypeOpaque))
		g.Expect(secret.Labels).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "Helm"))
		g.Expect(secret.Annotations).To(HaveKeyWithValue("meta.helm.sh/release-name", "deckhand"))
		g.Expect(secret.Data).To(HaveKey(webhookcert.CAKey))
		g.Expect(os.ReadFile(filepath.Join(r.CertDir, webhookcert.CertKey))).To(Equal(secret.Data[webhookcert.CertKey]))
	})

	t.Run("filled by an earlier release", func(t *testing.T) {
		g := NewWithT(t)
		ns := env.Namespace(t)
		earlier := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "webhook-cert"}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: nil, corev1.TLSPrivateKeyKey: nil}}
		g.Expect(env.Client.Create(ctx, earlier)).To(Succeed())
		cfg := webhookConfig(t)
		g.Expect(rotator(t, ns, cfg.Name).Ensure(ctx)).To(Succeed())
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(earlier), earlier)).To(Succeed())

		r := rotator(t, ns, cfg.Name) // the new release's manager, a new pod
		g.Expect(r.Ensure(ctx)).To(Succeed())
		secret := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(earlier), secret)).To(Succeed())
		g.Expect(secret.ResourceVersion).To(Equal(earlier.ResourceVersion), "the Secret was rewritten")
		g.Expect(secret.Type).To(Equal(corev1.SecretTypeTLS))
		g.Expect(os.ReadFile(filepath.Join(r.CertDir, webhookcert.CertKey))).To(Equal(secret.Data[webhookcert.CertKey]))
	})
}
