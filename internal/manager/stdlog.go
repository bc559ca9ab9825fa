package manager

import (
	"log"
	"strings"

	"github.com/go-logr/logr"

	"github.com/deckhand-dev/deckhand/internal/webhookcert"
)

// routeStandardLog sends what the standard log package is given to l, one
// structured entry a line, instead of unstructured lines on stderr. The
// servers controller-runtime starts for the manager (webhooks, metrics,
// probes, pprof) build their http.Server with no ErrorLog and expose none,
// so net/http writes its errors through the standard logger: above all
// "http: TLS handshake error from ADDR: REASON", one per probe or apiserver
// call while the webhook certificate is checked at a start
// (issuingServer). Those refusals (webhookcert.ErrNotIssued) are expected
// and go at debug level (V(1)); any other handshake error at info level,
// with the remote address; any other line at info level as it is. Deckhand
// itself does not log through the standard logger. The route is the
// process's: the last manager built sets it.
func routeStandardLog(l logr.Logger) {
	log.SetPrefix("")
	log.SetFlags(0)
	log.SetOutput(stdlogWriter{l: l})
}

// stdlogWriter is the standard logger's output: the log package writes
// each line with one Write.
type stdlogWriter struct{ l logr.Logger }

const handshakeError = "http: TLS handshake error from "

var errNotIssued = webhookcert.ErrNotIssued.Error()

func (w stdlogWriter) Write(p []byte) (int, error) {
	line := strings.TrimSuffix(string(p), "\n")
	rest, isHandshake := strings.CutPrefix(line, handshakeError)
	remote, reason, ok := strings.Cut(rest, ": ")
	switch {
	case !isHandshake || !ok:
		w.l.Info(line)
	case strings.Contains(reason, errNotIssued):
		w.l.V(1).Info("TLS handshake refused: no serving certificate yet", "remote", remote)
	default:
		w.l.Info("TLS handshake error", "remote", remote, "reason", reason)
	}
	return len(p), nil
}
