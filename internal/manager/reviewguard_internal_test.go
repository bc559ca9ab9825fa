package manager

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// A review is read only within its bounds: a larger one is refused unread,
// the body of one that lies about its length is cut at the limit, and
// reviews beyond the slots wait, then give up at their deadline.
func TestGuardReviewBoundsEveryReview(t *testing.T) {
	var read int64
	var mu sync.Mutex
	release := make(chan struct{})
	hook := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		mu.Lock()
		read += n
		mu.Unlock()
		if r.URL.Path == "/hold" {
			<-release
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
	})
	slots := make(chan struct{}, 1)
	guarded := guardReview(hook, slots, 1024, 200*time.Millisecond)

	t.Run("larger than the limit, refused unread", func(t *testing.T) {
		rec := httptest.NewRecorder()
		guarded.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(strings.Repeat("x", 2048))))
		if rec.Code != http.StatusRequestEntityTooLarge || read != 0 {
			t.Errorf("status %d after reading %d bytes, want 413 and nothing read", rec.Code, read)
		}
	})
	t.Run("a body longer than it says, cut at the limit", func(t *testing.T) {
		read = 0
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(strings.Repeat("x", 1<<20)))
		req.ContentLength = -1
		rec := httptest.NewRecorder()
		guarded.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest || read > 1024 {
			t.Errorf("status %d after reading %d bytes, want 400 and at most 1024 read", rec.Code, read)
		}
	})
	t.Run("beyond the slots, a review waits and then gives up", func(t *testing.T) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			guarded.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/hold", strings.NewReader("{}")))
		}()
		for len(slots) == 0 {
			time.Sleep(time.Millisecond)
		}
		rec := httptest.NewRecorder()
		guarded.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{}")))
		close(release)
		<-done
		if rec.Code != http.StatusServiceUnavailable {
			t.Errorf("status %d while the only slot was taken, want 503", rec.Code)
		}
	})
}

// Only validating webhooks are guarded; conversion reviews, which carry a
// page of a list, keep controller-runtime's own limit.
func TestOnlyValidatingWebhooksAreGuarded(t *testing.T) {
	registered := map[string]http.Handler{}
	s := guardedServer{Server: recordingServer{registered}, slots: make(chan struct{}, 1)}
	plain := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	s.Register("/validate-batch-deckhand-dev-v1-jobwatcher", plain)
	s.Register("/convert", plain)
	big := func() *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{}"))
		r.ContentLength = maxReviewBytes + 1
		return r
	}
	rec := httptest.NewRecorder()
	registered["/validate-batch-deckhand-dev-v1-jobwatcher"].ServeHTTP(rec, big())
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("validating webhook: status %d for an oversized review, want 413", rec.Code)
	}
	rec = httptest.NewRecorder()
	registered["/convert"].ServeHTTP(rec, big())
	if rec.Code != http.StatusOK {
		t.Errorf("conversion webhook: status %d, want it left to controller-runtime", rec.Code)
	}
}

// recordingServer keeps what is registered on it.
type recordingServer struct{ handlers map[string]http.Handler }

func (recordingServer) NeedLeaderElection() bool                  { return false }
func (s recordingServer) Register(path string, hook http.Handler) { s.handlers[path] = hook }
func (recordingServer) Start(context.Context) error               { return nil }
func (recordingServer) StartedChecker() healthz.Checker           { return nil }
func (recordingServer) WebhookMux() *http.ServeMux                { return nil }
