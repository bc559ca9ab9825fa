// Package webhookcert lets Deckhand run its admission webhooks without
// cert-manager: the manager keeps a CA and a serving certificate in a Secret
// of its own namespace, writes them where the webhook server reads them, and
// puts the CA into its webhook configurations' caBundle. Every replica runs
// it (webhooks are served by all replicas, not only the leader); they agree
// through the Secret's resourceVersion.
package webhookcert

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// The manager reads and writes only its own certificate Secret, by name
// (the default of --webhook-cert-secret), and patches only its own webhook
// configuration and the CRDs it converts. It never creates the Secret: a
// create cannot be limited by name (the apiserver authorizes it before the
// object has one), and a manager that may create Secrets in its namespace
// may mint a token for any ServiceAccount there. Both installs ship the
// Secret empty; the manager fills it. Deckhand has no mutating webhook, so
// it has no right on mutating configurations. These rights are the
// self-signed mode's alone: with cert-manager the installs grant none of
// them (hack/helmsync splits them off; test/installs checks each mode).
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,verbs=get;update,resourceNames=deckhand-webhook-server-cert
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;patch,resourceNames=deckhand-validating-webhook-configuration
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;patch,resourceNames=podsets.apps.deckhand.dev
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;patch,resourceNames=podbuggers.debug.deckhand.dev

// Secret keys.
const (
	CAKey   = "ca.crt"
	CertKey = "tls.crt"
	KeyKey  = "tls.key"
	caKey   = "ca.key"
)

// Lifetimes: a long-lived CA, so caBundle rarely changes, and a serving
// certificate renewed well before it expires.
const (
	caValidity   = 10 * 365 * 24 * time.Hour
	certValidity = 365 * 24 * time.Hour
	renewBefore  = 90 * 24 * time.Hour
	// checkInterval bounds how long a replica serves a certificate from a CA
	// another replica replaced (Secret deleted, CA expiring), and how long a
	// re-created webhook configuration goes without caBundle: three GETs a
	// minute per replica.
	checkInterval = time.Minute
	// caOverlap is how long after a new CA is in every caBundle the CAs it
	// replaces stay there beside it: a replica takes the certificate the
	// new CA signed only once that CA is in every caBundle, within
	// checkInterval of it, so until then some still serve one signed by an
	// old CA, and the apiserver must trust both. It counts from the
	// injection (InjectedAnnotation), not from the issue: an injection that
	// failed for longer than caOverlap must not cut the old CA at once.
	caOverlap = 5 * checkInterval
	// retryInterval is how soon a pass that failed (an injection refused,
	// the apiserver unreachable) is tried again.
	retryInterval = 5 * time.Second
	// backdate is how far before its issue a certificate becomes valid, to
	// tolerate clocks that are a little behind.
	backdate = time.Hour
	// firstPassTimeout bounds the first pass of Start: a manager that cannot
	// get a certificate its callers trust within it stops with the reason.
	firstPassTimeout = time.Minute
)

// InjectedAnnotation is, on the certificate Secret, when its CA was first
// seen in every caBundle (RFC 3339); the CAs it replaced leave caBundle
// caOverlap after that. A new CA comes without it.
const InjectedAnnotation = "webhookcert.deckhand.dev/ca-injected-at"

// Rotator keeps the serving certificate valid and the CA injected.
type Rotator struct {
	// Client must read from the apiserver directly: the manager's cache is not
	// running yet when the first certificate is needed.
	Client client.Client
	// SecretNamespace and SecretName locate the Secret that holds the CA and
	// serving certificate.
	SecretNamespace, SecretName string
	// Hosts are the DNS names or IPs the serving certificate is valid for.
	Hosts []string
	// CertDir is where tls.crt and tls.key are written (read by the expiry
	// metric, ReportExpiry, and by a server not given GetCertificate).
	CertDir string
	// ValidatingConfigurations and MutatingConfigurations name the webhook
	// configurations whose caBundle is kept at the CA; missing ones are
	// skipped (a deployment may have only one of the two).
	ValidatingConfigurations, MutatingConfigurations []string
	// CRDs name the CustomResourceDefinitions whose conversion webhook's
	// caBundle is kept at the CA; missing ones, and ones whose conversion is
	// not a webhook, are skipped.
	CRDs []string
	// Now returns the current time; nil means time.Now.
	Now func() time.Time

	// serving is the pair of the last pass that found its CA in every
	// caBundle: what GetCertificate hands out.
	serving atomic.Pointer[servingPair]
}

// servingPair is a serving certificate and its key, as PEM and parsed.
type servingPair struct {
	certPEM, keyPEM []byte
	cert            *tls.Certificate
}

// Start makes a first pass at once, and fails with its error, then keeps
// the certificate fresh until ctx ends. It is a manager Runnable that runs
// on every replica, started beside the webhook server (which serves
// nothing before the first pass is done: GetCertificate) and so
// concurrently with the caches' first lists.
func (r *Rotator) Start(ctx context.Context) error {
	first, cancel := context.WithTimeout(ctx, firstPassTimeout)
	err := r.Ensure(first)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped meanwhile
		}
		return fmt.Errorf("issuing the webhook serving certificate: %w", err)
	}
	t := time.NewTimer(checkInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			next := checkInterval
			if err := r.Ensure(ctx); err != nil {
				logf.FromContext(ctx).Error(err, "refreshing the webhook serving certificate")
				next = retryInterval
			}
			t.Reset(next)
		}
	}
}

// NeedLeaderElection is false: every replica serves webhooks.
func (r *Rotator) NeedLeaderElection() bool { return false }

// GetCertificate is a tls.Config GetCertificate for the servers that serve
// the certificate: the one the last pass of Ensure wrote, which is valid for
// Hosts and whose CA was then in every caBundle. Until a pass has got that
// far it fails every handshake, so a server started before the first pass
// ends never presents a certificate that is missing, expired, for other
// hosts or from a CA its callers do not trust yet.
func (r *Rotator) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if p := r.serving.Load(); p != nil {
		return p.cert, nil
	}
	return nil, ErrNotIssued
}

// ErrNotIssued is how GetCertificate refuses a handshake before the first
// pass has found the CA in every caBundle: expected while a manager starts
// (a probe, the apiserver's calls), so its servers log it at debug level.
var ErrNotIssued = errors.New("no webhook serving certificate yet: its CA is not in every caBundle")

// Ensure makes one pass: the Secret holds a valid CA and serving certificate
// (created or renewed as needed), the webhook configurations trust its CA,
// and the files in CertDir and GetCertificate hold that certificate. A
// replica serves a certificate only once its CA is in every caBundle (its own injection may fail, another
// replica's may have done it), and the CAs it replaced stay trusted until
// caOverlap after that was first seen, so a CA rotation fails no request:
// not on this replica, and not on the others, which still serve the old
// certificate until their next pass, however long the injection took.
func (r *Rotator) Ensure(ctx context.Context) error {
	secret, err := r.ensureSecret(ctx)
	if err != nil {
		return err
	}
	keepOld := true
	if at, err := time.Parse(time.RFC3339, secret.Annotations[InjectedAnnotation]); err == nil {
		keepOld = !r.now().After(at.Add(caOverlap))
	}
	if err := r.injectCA(ctx, secret.Data[CAKey], keepOld); err != nil {
		// This replica keeps serving the certificate it has: the new CA is
		// not trusted everywhere yet, the old one still is.
		return err
	}
	if err := r.markInjected(ctx, secret); err != nil {
		return err
	}
	if err := r.writeFiles(secret); err != nil {
		return err
	}
	return r.serve(secret.Data[CertKey], secret.Data[KeyKey])
}

// serve makes the pair what GetCertificate hands out, parsed only when it
// changed.
func (r *Rotator) serve(certPEM, keyPEM []byte) error {
	if p := r.serving.Load(); p != nil && bytes.Equal(p.certPEM, certPEM) && bytes.Equal(p.keyPEM, keyPEM) {
		return nil
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("loading the serving certificate: %w", err)
	}
	r.serving.Store(&servingPair{certPEM: bytes.Clone(certPEM), keyPEM: bytes.Clone(keyPEM), cert: &cert})
	return nil
}

// markInjected records on the Secret, once, when its CA was first seen in
// every caBundle. Replicas racing agree on the first record; a Secret whose
// CA changed meanwhile (another replica issued a new one) fails the pass:
// the files are written on the next one, for that CA.
func (r *Rotator) markInjected(ctx context.Context, secret *corev1.Secret) error {
	ca := secret.Data[CAKey]
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if _, ok := secret.Annotations[InjectedAnnotation]; ok {
			return nil
		}
		marked := secret.DeepCopy()
		if marked.Annotations == nil {
			marked.Annotations = map[string]string{}
		}
		marked.Annotations[InjectedAnnotation] = r.now().UTC().Format(time.RFC3339)
		err := r.Client.Update(ctx, marked)
		if !apierrors.IsConflict(err) {
			return err
		}
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
			return err
		}
		if !bytes.Equal(secret.Data[CAKey], ca) {
			return errors.New("another replica issued a new CA")
		}
		return err
	})
	return wrap(err, "recording the CA injection on Secret %s/%s", r.SecretNamespace, r.SecretName)
}

func (r *Rotator) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// ensureSecret returns the certificate Secret, filling or renewing it when
// it is empty, invalid, close to expiry or not valid for Hosts. The Secret
// must exist: the installs ship it empty, and the manager may not create
// Secrets (ErrNoSecret). Any type will do (the installs ship an Opaque one;
// a Secret an earlier release created is kubernetes.io/tls): only its data
// is written. Two replicas racing both retry on conflict and end with the
// same Secret.
func (r *Rotator) ensureSecret(ctx context.Context) (*corev1.Secret, error) {
	for attempt := 0; attempt < 5; attempt++ {
		secret := &corev1.Secret{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.SecretNamespace, Name: r.SecretName}, secret)
		switch {
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("%w: Secret %s/%s is missing; the install ships it empty for the manager to fill "+
				"(kubectl create secret generic %s -n %s, or apply the install again)",
				ErrNoSecret, r.SecretNamespace, r.SecretName, r.SecretName, r.SecretNamespace)
		case err != nil:
			return nil, fmt.Errorf("reading Secret %s/%s: %w", r.SecretNamespace, r.SecretName, err)
		}
		if r.fresh(secret.Data) {
			return secret, nil
		}
		data, err := r.issue(secret.Data)
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(data[CAKey], secret.Data[CAKey]) {
			delete(secret.Annotations, InjectedAnnotation) // a new CA, injected nowhere yet
		}
		secret.Data = data
		if err = r.Client.Update(ctx, secret); apierrors.IsConflict(err) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("updating Secret %s/%s: %w", r.SecretNamespace, r.SecretName, err)
		}
		logf.FromContext(ctx).Info("issued the webhook serving certificate", "secret", client.ObjectKeyFromObject(secret))
		return secret, nil
	}
	return nil, fmt.Errorf("secret %s/%s kept changing under us", r.SecretNamespace, r.SecretName)
}

// ErrNoSecret is why a pass fails when the certificate Secret does not
// exist: the manager does not create it.
var ErrNoSecret = errors.New("no webhook certificate Secret")

// fresh reports whether data holds a CA and a serving certificate signed by
// it, valid for every host, valid now (not only later: a certificate issued
// by a clock running ahead, or written by hand, would otherwise be kept
// until it expires, and every TLS handshake refused meanwhile), with more
// than renewBefore left.
func (r *Rotator) fresh(data map[string][]byte) bool {
	ca, _, err := parsePair(data[CAKey], data[caKey])
	if err != nil || !r.usable(ca) {
		return false
	}
	cert, _, err := parsePair(data[CertKey], data[KeyKey])
	if err != nil || !r.usable(cert) || cert.CheckSignatureFrom(ca) != nil {
		return false
	}
	for _, h := range r.Hosts {
		if cert.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

// usable says whether cert is valid now and for more than renewBefore.
// Certificates are backdated when issued, so a replica whose clock is
// somewhat behind the issuer's still finds them valid.
func (r *Rotator) usable(cert *x509.Certificate) bool {
	now := r.now()
	return !now.Before(cert.NotBefore) && !now.Add(renewBefore).After(cert.NotAfter)
}

// issue signs a new serving certificate, with the CA in old when that CA is
// still good (so caBundle does not change), else with a new CA.
func (r *Rotator) issue(old map[string][]byte) (map[string][]byte, error) {
	now := r.now()
	caCert, caPriv, err := parsePair(old[CAKey], old[caKey])
	caPEM, caKeyPEM := old[CAKey], old[caKey]
	if err != nil || !r.usable(caCert) {
		if caCert, caPriv, caPEM, caKeyPEM, err = newCA(now); err != nil {
			return nil, err
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: r.Hosts[0]},
		NotBefore:    now.Add(-backdate),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range r.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caPriv)
	if err != nil {
		return nil, fmt.Errorf("signing the serving certificate: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		CAKey:   caPEM,
		caKey:   caKeyPEM,
		CertKey: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyKey:  keyPEM,
	}, nil
}

func newCA(now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, []byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "deckhand-webhook-ca"},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("creating the webhook CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// writeFiles puts the serving pair where the webhook server reads it; the
// server's certificate watcher picks up a change without a restart.
func (r *Rotator) writeFiles(secret *corev1.Secret) error {
	if err := os.MkdirAll(r.CertDir, 0o700); err != nil {
		return err
	}
	dir, err := os.OpenRoot(r.CertDir)
	if err != nil {
		return err
	}
	defer dir.Close()
	for _, k := range []string{KeyKey, CertKey} { // key first: the watcher reloads on tls.crt
		if current, err := dir.ReadFile(k); err == nil && bytes.Equal(current, secret.Data[k]) {
			continue
		}
		// Written aside and renamed into place: the watcher never reads a
		// half-written file.
		if err := dir.WriteFile(k+".new", secret.Data[k], 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", k, err)
		}
		if err := dir.Rename(k+".new", k); err != nil {
			return fmt.Errorf("replacing %s: %w", k, err)
		}
	}
	return nil
}

// injectCA sets caBundle on every webhook of the named configurations to
// the bundle they should trust (with the CAs it replaces when keepOld),
// with one merge patch per configuration that needs one. It fails unless
// every caBundle then holds ca.
func (r *Rotator) injectCA(ctx context.Context, ca []byte, keepOld bool) error {
	bundle := func(current []byte) []byte { return caBundle(ca, current, r.now(), keepOld) }
	errs := make([]error, 0, len(r.ValidatingConfigurations)+len(r.MutatingConfigurations)+len(r.CRDs))
	for _, name := range r.ValidatingConfigurations {
		errs = append(errs, r.patchCA(ctx, "webhook configuration", name, &admissionregistrationv1.ValidatingWebhookConfiguration{}, ca, bundle))
	}
	for _, name := range r.MutatingConfigurations {
		errs = append(errs, r.patchCA(ctx, "webhook configuration", name, &admissionregistrationv1.MutatingWebhookConfiguration{}, ca, bundle))
	}
	for _, name := range r.CRDs {
		errs = append(errs, r.patchCA(ctx, "CustomResourceDefinition", name, newCRD(), ca, bundle))
	}
	return errors.Join(errs...)
}

// caBundle is what a webhook whose caBundle is current should trust: the
// CA, and, while keepOld (until caOverlap after that CA was in every
// caBundle), the other unexpired certificates current holds (the CAs it
// replaces). After that, the CA alone.
func caBundle(ca, current []byte, now time.Time, keepOld bool) []byte {
	caCert, err := parseCert(ca)
	if err != nil || !keepOld {
		return ca
	}
	out := bytes.Clone(ca)
	for rest := current; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			return out
		}
		old, err := x509.ParseCertificate(block.Bytes)
		if err != nil || old.Equal(caCert) || now.After(old.NotAfter) || bytes.Contains(out, pem.EncodeToMemory(block)) {
			continue
		}
		out = append(out, pem.EncodeToMemory(block)...)
	}
}

// newCRD is an empty CustomResourceDefinition, read as unstructured: the
// manager's scheme does not know apiextensions, and only one field is
// touched.
func newCRD() *unstructured.Unstructured {
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	return crd
}

// caBundleField is where a CRD's conversion webhook keeps its caBundle.
var caBundleField = []string{"spec", "conversion", "webhook", "clientConfig", "caBundle"}

// crdClientConfig is a CRD's conversion webhook client configuration with
// the caBundle it holds; nil when the CRD does not convert through a
// webhook.
func crdClientConfig(crd *unstructured.Unstructured) *admissionregistrationv1.WebhookClientConfig {
	if strategy, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "strategy"); strategy != "Webhook" {
		return nil
	}
	if _, found, _ := unstructured.NestedMap(crd.Object, caBundleField[:4]...); !found {
		return nil
	}
	current, _, _ := unstructured.NestedString(crd.Object, caBundleField...)
	decoded, err := base64.StdEncoding.DecodeString(current)
	if err != nil {
		decoded = nil // not a bundle: replaced by the CA
	}
	return &admissionregistrationv1.WebhookClientConfig{CABundle: decoded}
}

// clientConfigs points at the client configuration of every webhook in a
// validating or mutating configuration.
func clientConfigs(cfg client.Object) []*admissionregistrationv1.WebhookClientConfig {
	var out []*admissionregistrationv1.WebhookClientConfig
	switch cfg := cfg.(type) {
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for i := range cfg.Webhooks {
			out = append(out, &cfg.Webhooks[i].ClientConfig)
		}
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for i := range cfg.Webhooks {
			out = append(out, &cfg.Webhooks[i].ClientConfig)
		}
	}
	return out
}

func (r *Rotator) patchCA(ctx context.Context, what, name string, cfg client.Object, ca []byte, bundle func(current []byte) []byte) error {
	// The optimistic lock makes a concurrent edit (another replica, an
	// upgrade re-applying the configuration) fail the patch instead of being
	// overwritten; it is then retried on what the apiserver holds.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, cfg); err != nil {
			return err
		}
		if crd, ok := cfg.(*unstructured.Unstructured); ok {
			cc := crdClientConfig(crd)
			if cc == nil || bytes.Equal(cc.CABundle, bundle(cc.CABundle)) {
				return nil
			}
			// The patch names the one field: a CRD carries its whole schema
			// (hundreds of kilobytes), and a merge patch computed from two
			// copies of it cost the manager more memory at start than all it
			// caches afterwards.
			patch, err := json.Marshal(map[string]any{
				"metadata": map[string]any{"resourceVersion": crd.GetResourceVersion()},
				"spec": map[string]any{"conversion": map[string]any{"webhook": map[string]any{
					"clientConfig": map[string]any{"caBundle": base64.StdEncoding.EncodeToString(bundle(cc.CABundle))}}}},
			})
			if err != nil {
				return err
			}
			return r.Client.Patch(ctx, cfg, client.RawPatch(types.MergePatchType, patch))
		}
		base := cfg.DeepCopyObject().(client.Object)
		changed := false
		for _, cc := range clientConfigs(cfg) {
			if want := bundle(cc.CABundle); !bytes.Equal(cc.CABundle, want) {
				cc.CABundle = want
				changed = true
			}
		}
		if !changed {
			return nil
		}
		return r.Client.Patch(ctx, cfg, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	})
	if apierrors.IsNotFound(err) || (err != nil && r.holdsCA(ctx, name, cfg, ca)) {
		// Missing, or trusting ca already (another replica put it there):
		// only pruning the CAs it replaces failed, which the next pass does.
		return nil
	}
	return wrap(err, "setting caBundle on %s %s", what, name)
}

// holdsCA reads the configuration name again and reports whether every
// caBundle it has holds ca.
func (r *Rotator) holdsCA(ctx context.Context, name string, cfg client.Object, ca []byte) bool {
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, cfg); err != nil {
		return false
	}
	var bundles [][]byte
	if crd, ok := cfg.(*unstructured.Unstructured); ok {
		if cc := crdClientConfig(crd); cc != nil {
			bundles = append(bundles, cc.CABundle)
		}
	}
	for _, cc := range clientConfigs(cfg) {
		bundles = append(bundles, cc.CABundle)
	}
	for _, b := range bundles {
		if !bytes.Contains(b, ca) {
			return false
		}
	}
	return true
}

func parsePair(certPEM, keyPEM []byte) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cert, err := parseCert(certPEM)
	if err != nil {
		return nil, nil, err
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, nil, errors.New("missing key")
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

// parseCert parses the first certificate of a PEM bundle.
func parseCert(certPEM []byte) (*x509.Certificate, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil {
		return nil, errors.New("missing certificate")
	}
	return x509.ParseCertificate(cb.Bytes)
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return n
}

func wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}
