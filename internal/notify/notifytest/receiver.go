// Package notifytest is a notification receiver for tests: it listens on
// loopback, answers 503 while down, and keeps each notification it took by
// idempotency key.
package notifytest

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/deckhand-dev/deckhand/internal/notify"
)

// Receiver takes JSON notifications (notify.FormatJSON).
type Receiver struct {
	*httptest.Server
	// Down makes it answer 503 and keep nothing.
	Down atomic.Bool

	mu    sync.Mutex
	taken map[string][]notify.Message
}

// NewReceiver starts a Receiver on 127.0.0.1, stopped when t ends.
func NewReceiver(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{taken: map[string][]notify.Message{}}
	r.Server = httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.Listener = l
	r.Start()
	t.Cleanup(r.Close)
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if r.Down.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	var m notify.Message
	b, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	key := req.Header.Get("Idempotency-Key")
	r.taken[key] = append(r.taken[key], m)
}

// Times returns how many times each key was taken.
func (r *Receiver) Times() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.taken))
	for k, ms := range r.taken {
		out[k] = len(ms)
	}
	return out
}

// Last returns the last notification taken under key (the zero Message if
// none was).
func (r *Receiver) Last(key string) notify.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	ms := r.taken[key]
	if len(ms) == 0 {
		return notify.Message{}
	}
	return ms[len(ms)-1]
}
