// Package webhookauth lets the webhook server demand that its callers
// prove who they are with a client certificate: where the cluster gives the
// apiserver one for Deckhand's webhooks (--admission-control-config-file,
// whose WebhookAdmissionConfiguration names a kubeconfig with a client
// certificate for the webhook Service), the manager admits only reviews
// sent with a certificate its CA file vouches for, and a review written by
// hand to the webhook port by a pod is refused unread.
//
// The apiserver presents that certificate to admission webhooks only: it
// calls CRD conversion webhooks without client credentials (no setting
// gives it any), so conversion (/convert) stays open to any caller the
// NetworkPolicy lets through, bounded as it was. That is why the TLS layer
// asks for a certificate and verifies any given (a certificate from another
// CA fails the handshake) but lets a caller without one finish it, and
// every other path refuses such a caller before reading its request.
package webhookauth

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"
)

// ConversionPath is where the manager serves CRD conversion, which the
// apiserver calls without a client certificate.
const ConversionPath = "/convert"

// ClientCAs verifies client certificates against the CA bundle in a file,
// read again when the file changes (a mounted ConfigMap is updated in
// place), at most once a second.
type ClientCAs struct {
	path string

	mu      sync.Mutex
	data    []byte
	pool    *x509.CertPool
	checked time.Time
}

// Load reads the CA bundle at path; it fails unless the file holds at
// least one certificate.
func Load(path string) (*ClientCAs, error) {
	c := &ClientCAs{path: path}
	if _, err := c.current(); err != nil {
		return nil, err
	}
	return c, nil
}

// current is the pool of the file as last read; a file that became
// unreadable or empty keeps the pool it had.
func (c *ClientCAs) current() (*x509.CertPool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pool != nil && time.Since(c.checked) < time.Second {
		return c.pool, nil
	}
	c.checked = time.Now()
	data, err := os.ReadFile(c.path)
	if err == nil && c.pool != nil && bytes.Equal(data, c.data) {
		return c.pool, nil
	}
	if err == nil {
		pool := x509.NewCertPool()
		if pool.AppendCertsFromPEM(data) {
			c.data, c.pool = data, pool
			return pool, nil
		}
		err = errors.New("no PEM certificate in it")
	}
	if c.pool != nil {
		return c.pool, nil
	}
	return nil, fmt.Errorf("reading the webhook client CA %s: %w", c.path, err)
}

// TLSOption makes a server ask every client for a certificate and verify
// the one it gives against the CAs; a client that gives none still
// completes the handshake (Require refuses it on every path but
// conversion's).
func (c *ClientCAs) TLSOption(cfg *tls.Config) {
	cfg.ClientAuth = tls.VerifyClientCertIfGiven
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		pool, err := c.current()
		if err != nil {
			return nil, err
		}
		per := cfg.Clone()
		per.GetConfigForClient = nil
		per.ClientCAs = pool
		return per, nil
	}
}

// Require refuses, before reading it, a request whose connection presented
// no client certificate the CAs verified.
func Require(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			http.Error(w, "a client certificate is required: only the apiserver may send admission reviews", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}
