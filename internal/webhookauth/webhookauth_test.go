package webhookauth_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	"github.com/deckhand-dev/deckhand/internal/manager"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

var (
	env *testenv.Env
	// caFile is the CA of the client certificate the apiserver presents to
	// webhooks; apiserverCert is that certificate, and strangerCert one
	// from another CA.
	caFile                      string
	apiserverCert, strangerCert tls.Certificate
)

// TestMain gives envtest's kube-apiserver a client certificate for every
// webhook it calls, as a cluster administrator would for Deckhand's: an
// AdmissionConfiguration (--admission-control-config-file) whose
// WebhookAdmissionConfiguration names a kubeconfig with that certificate.
// envtest's webhooks are URLs on 127.0.0.1 with a port chosen as it starts,
// so the kubeconfig's user is "*" (any webhook) rather than the
// "<service>.<namespace>.svc:443" an install names.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "webhookauth-")
	if err != nil {
		panic(err)
	}
	caPEM, apiserver := issueClientCert("deckhand-webhook-client-ca", "kube-apiserver")
	_, stranger := issueClientCert("another-ca", "kube-apiserver")
	apiserverCert, strangerCert = apiserver.pair, stranger.pair
	caFile = filepath.Join(dir, "client-ca.crt")
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
users:
- name: "*"
  user:
    client-certificate: %s
    client-key: %s
`, filepath.Join(dir, "apiserver.crt"), filepath.Join(dir, "apiserver.key"))
	admission := fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ValidatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %[1]s
- name: MutatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %[1]s
`, filepath.Join(dir, "webhook-kubeconfig"))
	for name, data := range map[string][]byte{
		"client-ca.crt": caPEM, "apiserver.crt": apiserver.certPEM, "apiserver.key": apiserver.keyPEM,
		"webhook-kubeconfig": []byte(kubeconfig), "admission.yaml": []byte(admission),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			panic(err)
		}
	}
	testenv.MainWith(m, &env, func(e *envtest.Environment) {
		e.ControlPlane.GetAPIServer().Configure().Set("admission-control-config-file", filepath.Join(dir, "admission.yaml"))
	})
}

type issued struct {
	certPEM, keyPEM []byte
	pair            tls.Certificate
}

// issueClientCert makes a CA and a client certificate it signs.
func issueClientCert(caName, cn string) (caPEM []byte, leaf issued) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: caName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		panic(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		panic(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	leaf.certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	leaf.keyPEM = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	if leaf.pair, err = tls.X509KeyPair(leaf.certPEM, leaf.keyPEM); err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), leaf
}

// With --webhook-client-ca-file, the webhooks admit through the apiserver,
// which presents the certificate its admission configuration gives it,
// while a review written by hand to the webhook port is refused: unread
// without a certificate, at the TLS handshake with one from another CA.
// Conversion stays open (the apiserver sends it no certificate).
func TestOnlyReviewsWithTheApiserversCertificateAreAdmitted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	opts := env.ManagerOptions()
	opts.WebhookClientCAFile = caFile
	env.StartManager(t, opts)
	ns := env.Namespace(t)

	// Through the apiserver: the webhook answers, refusing a bad pattern
	// (only the webhook compiles them) and admitting a good one.
	watcher := func(name, pattern string) *deckhandbatchv1.JobWatcher {
		return &deckhandbatchv1.JobWatcher{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: deckhandbatchv1.JobWatcherSpec{JobPolicy: deckhandbatchv1.JobPolicy{
				TTLSecondsAfterSucceeded: ptr.To[int32](10), JobNamePatterns: []string{pattern}}},
		}
	}
	err := env.Client.Create(ctx, watcher("bad", "([a-z"), client.DryRunAll)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid from the webhook, got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("error parsing regexp"))
	g.Expect(env.Client.Create(ctx, watcher("good", "^nightly-"))).To(Succeed())

	// By hand.
	review, err := json.Marshal(map[string]any{
		"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
		"request": map[string]any{
			"uid":       "forged",
			"kind":      map[string]any{"group": "batch.deckhand.dev", "version": "v1", "kind": "JobWatcher"},
			"resource":  map[string]any{"group": "batch.deckhand.dev", "version": "v1", "resource": "jobwatchers"},
			"namespace": ns, "operation": "CREATE", "object": watcher("forged", "^a"),
		},
	})
	g.Expect(err).NotTo(HaveOccurred())
	addr := net.JoinHostPort(opts.WebhookHost, strconv.Itoa(opts.WebhookPort))
	post := func(cert *tls.Certificate, path string, body []byte) (int, string, error) {
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(env.WebhookCA())
		tlsConfig := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if cert != nil {
			// Sent whatever CAs the server names (Go's client would keep a
			// certificate they did not issue to itself).
			tlsConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
		}
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
		resp, err := hc.Post("https://"+addr+path, "application/json", bytes.NewReader(body))
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		var out bytes.Buffer
		_, _ = out.ReadFrom(resp.Body)
		return resp.StatusCode, out.String(), nil
	}
	const path = "/validate-batch-deckhand-dev-v1-jobwatcher"

	code, body, err := post(nil, path, review)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(code).To(Equal(http.StatusForbidden), "a review without a client certificate: %s", body)
	g.Expect(body).To(ContainSubstring("a client certificate is required"))

	_, _, err = post(&strangerCert, path, review)
	g.Expect(err).To(MatchError(ContainSubstring("tls: ")), "a certificate from another CA must fail the handshake")

	code, body, err = post(&apiserverCert, path, review)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(code).To(Equal(http.StatusOK), body)
	g.Expect(body).To(ContainSubstring(`"uid":"forged"`))

	conversion := []byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"c","desiredAPIVersion":"apps.deckhand.dev/v1alpha1","objects":[]}}`)
	code, body, err = post(nil, "/convert", conversion)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(code).To(Equal(http.StatusOK), "conversion, which the apiserver calls without a certificate: %s", body)
}

// A CA file that holds no certificate stops the manager before it starts,
// naming the flag.
func TestAClientCAFileWithoutACertificateIsRefused(t *testing.T) {
	g := NewWithT(t)
	bad := filepath.Join(t.TempDir(), "ca.crt")
	g.Expect(os.WriteFile(bad, []byte("not a certificate"), 0o600)).To(Succeed())
	opts := env.ManagerOptions()
	opts.WebhookClientCAFile = bad
	_, err := managerNew(opts)
	g.Expect(err).To(MatchError(ContainSubstring("--webhook-client-ca-file")))
}

func managerNew(opts manager.Options) (any, error) {
	return manager.New(context.Background(), env.Config, opts)
}
