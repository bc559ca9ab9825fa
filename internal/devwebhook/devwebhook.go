// Package devwebhook makes Deckhand's admission webhooks work for a manager
// that runs outside the cluster (`make run`, the e2e tests): it issues a
// serving certificate for the manager's local address and installs the
// generated webhook configurations pointed at that address instead of at the
// in-cluster Service.
package devwebhook

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NamePrefix is put before the generated configurations' names, as the
// kustomize install does.
const NamePrefix = "deckhand-"

// Install writes a CA and a serving certificate for host into certDir
// (tls.crt, tls.key, ca.crt), then applies every webhook configuration in
// manifests with its clientConfig pointing at https://host:port and trusting
// that CA. manifests is config/webhook/manifests.yaml as controller-gen
// writes it; an empty one installs nothing.
func Install(ctx context.Context, c client.Client, manifests []byte, certDir, host string, port int) error {
	ca, err := WriteCerts(certDir, host)
	if err != nil {
		return err
	}
	objs, err := Configurations(manifests, fmt.Sprintf("https://%s", net.JoinHostPort(host, fmt.Sprint(port))), ca)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("deckhand-dev"), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	return nil
}

// Configurations parses controller-gen's webhook manifests and returns them
// renamed with NamePrefix and rewritten to call baseURL+path and trust caPEM.
func Configurations(manifests []byte, baseURL string, caPEM []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("reading webhook manifests: %w", err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if k := obj.GetKind(); k != "ValidatingWebhookConfiguration" && k != "MutatingWebhookConfiguration" {
			return nil, fmt.Errorf("unexpected kind %q in webhook manifests", k)
		}
		obj.SetName(NamePrefix + obj.GetName())
		webhooks, _, err := unstructured.NestedSlice(obj.Object, "webhooks")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", obj.GetName(), err)
		}
		for i, w := range webhooks {
			hook, ok := w.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: webhooks[%d] is not an object", obj.GetName(), i)
			}
			path, _, _ := unstructured.NestedString(hook, "clientConfig", "service", "path")
			hook["clientConfig"] = map[string]any{
				"url":      baseURL + path,
				"caBundle": base64.StdEncoding.EncodeToString(caPEM),
			}
		}
		if err := unstructured.SetNestedSlice(obj.Object, webhooks, "webhooks"); err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
}

// WriteCerts makes certDir hold a CA (ca.crt) and a serving certificate and
// key for host (tls.crt, tls.key), valid for a year. Certificates already
// there are kept while they have more than a day to run, so a restarted
// manager keeps the CA the installed configurations trust. It returns the CA
// in PEM.
func WriteCerts(certDir, host string) ([]byte, error) {
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, err
	}
	dir, err := os.OpenRoot(certDir)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	ca, caErr := dir.ReadFile("ca.crt")
	cert, certErr := dir.ReadFile("tls.crt")
	if caErr == nil && certErr == nil && stillValid(cert, host) {
		return ca, nil
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(now.UnixNano()),
		Subject:               pkix.Name{CommonName: "deckhand-dev-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano() + 1),
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	files := map[string][]byte{
		"ca.crt":  caPEM,
		"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
	for name, data := range files {
		if err := dir.WriteFile(name, data, 0o600); err != nil {
			return nil, err
		}
	}
	return caPEM, nil
}

func stillValid(certPEM []byte, host string) bool {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return false
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return false
	}
	return time.Until(cert.NotAfter) > 24*time.Hour && cert.VerifyHostname(host) == nil
}
