package manager_test

import (
	"bytes"
	"context"
	"log"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"

	"github.com/deckhand-dev/deckhand/internal/manager"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// A handshake with the webhook server while the certificate is checked at
// a start is refused (TestCachesListWhileTheCertificateIsChecked), and
// net/http reports it through the standard logger, which wrote an
// unstructured "http: TLS handshake error from ...: no webhook serving
// certificate yet" line on stderr for every probe and apiserver call of
// that window, beside the manager's JSON. It is a structured entry of the
// manager's logger now, at debug level, with the remote address; and
// nothing reaches what the standard logger wrote to.
func TestAHandshakeRefusedAtStartIsLoggedStructured(t *testing.T) {
	g := NewWithT(t)
	opts := restartOptions(t)
	secretPath := "/api/v1/namespaces/" + opts.Namespace + "/secrets/" + opts.WebhookCertSecret

	stderr := &lockedBuffer{}
	log.SetOutput(stderr)
	t.Cleanup(func() { log.SetOutput(os.Stderr) })
	entries := &lockedBuffer{}
	logger := funcr.New(func(prefix, args string) { entries.WriteString(prefix + " " + args + "\n") }, funcr.Options{Verbosity: 1})

	var once sync.Once
	var handshakeWhileHeld error
	held := &startLog{}
	held.hold = func(req *http.Request) {
		if req.Method != http.MethodGet || req.URL.Path != secretPath {
			return
		}
		once.Do(func() {
			handshakeWhileHeld = handshakeOnceListening(opts)
		})
	}
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), logger))
	mgr, err := manager.New(ctx, held.config(env.Config), opts)
	g.Expect(err).NotTo(HaveOccurred())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager stopped with an error: %v", err)
		}
	})
	g.Eventually(func() error { return mgr.GetWebhookServer().StartedChecker()(nil) }).WithTimeout(testenv.Timeout).Should(Succeed())
	g.Eventually(func() error { return handshake(opts, nil) }).WithTimeout(testenv.Timeout).Should(Succeed())
	g.Expect(handshakeWhileHeld).To(HaveOccurred(), "the webhook server presented a certificate before its CA was checked")

	g.Eventually(entries.String).WithTimeout(5 * time.Second).Should(
		MatchRegexp(`http.*"level"=1 "msg"="TLS handshake refused: no serving certificate yet" "remote"="127\.0\.0\.1:\d+"`))
	g.Expect(stderr.String()).To(BeEmpty(), "written unstructured through the standard logger")
	g.Expect(entries.String()).NotTo(ContainSubstring("http: TLS handshake error"))
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) WriteString(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b.WriteString(s)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Clone(b.b.String())
}
