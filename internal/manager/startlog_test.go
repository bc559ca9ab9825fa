package manager_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/deckhand-dev/deckhand/internal/testenv/faultinject"
)

// startLog records every request a manager makes to the apiserver, in
// the order they were sent, with when each was sent and answered: what a
// start spends on the wire, and in which order.
type startLog struct {
	mu      sync.Mutex
	t0      time.Time
	entries []*request
	// hold, when set, is called before a request is sent and may block it.
	hold func(*http.Request)
}

type request struct {
	verb, path string
	sent, done time.Duration // since t0
	code       int
}

// config is cfg with every request recorded.
func (l *startLog) config(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	l.t0 = time.Now()
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return faultinject.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if l.hold != nil {
				l.hold(req)
			}
			e := &request{verb: verbOf(req), path: req.URL.Path, sent: time.Since(l.t0)}
			l.mu.Lock()
			l.entries = append(l.entries, e)
			l.mu.Unlock()
			resp, err := rt.RoundTrip(req)
			l.mu.Lock()
			e.done = time.Since(l.t0)
			if resp != nil {
				e.code = resp.StatusCode
			}
			l.mu.Unlock()
			return resp, err
		})
	})
	return cfg
}

// verbOf is the Kubernetes verb of req: LIST and WATCH told from GET.
func verbOf(req *http.Request) string {
	switch {
	case req.Method != http.MethodGet:
		return req.Method
	case req.URL.Query().Get("watch") == "true":
		return "WATCH"
	case isList(req.URL.Path):
		return "LIST"
	}
	return "GET"
}

// isList tells a collection from an object: /api/v1/namespaces/ns/secrets
// and /apis/g/v/jobs end in a resource, /api/v1/namespaces/ns/secrets/name
// in a name (discovery paths count as GETs).
func isList(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) > 0 && parts[0] == "api":
		if len(parts) < 2 {
			return false
		}
		parts = parts[2:] // api, v1
	case len(parts) > 0 && parts[0] == "apis":
		if len(parts) < 3 {
			return false
		}
		parts = parts[3:] // apis, group, version
	default:
		return false
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		if len(parts) == 2 {
			return false // a namespace
		}
		parts = parts[2:]
	}
	return len(parts) == 1
}

// snapshot is a copy of the entries so far.
func (l *startLog) snapshot() []request {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]request, len(l.entries))
	for i, e := range l.entries {
		out[i] = *e
	}
	return out
}

func (l *startLog) String() string {
	var b strings.Builder
	for _, e := range l.snapshot() {
		fmt.Fprintf(&b, "%8.1f ms %8.1f ms  %-6s %s %d\n", ms(e.sent), ms(e.done), e.verb, e.path, e.code)
	}
	return b.String()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
