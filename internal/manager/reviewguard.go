package manager

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/deckhand-dev/deckhand/internal/webhookauth"
)

// What one admission review may cost the manager, whoever sent it. The
// webhook port answers any client the NetworkPolicy lets through, and a
// review written by hand has met no schema: each validator bounds what it
// reads (internal/webhook/review), and the server bounds the rest.
const (
	// maxReviewBytes is the largest admission review read: an update's
	// object and old object, each at most what etcd stores (1.5 MiB), and
	// the review around them. Larger ones are refused unread.
	maxReviewBytes = 3<<20 + 512<<10
	// maxReviewsAtOnce is how many reviews are decoded and validated at
	// once; the others wait for a slot, until their deadline.
	maxReviewsAtOnce = 4
	// reviewDeadline is how long a review may take, waiting included: the
	// apiserver gives up on a webhook after 10 s by default.
	reviewDeadline = 10 * time.Second
)

// guardedServer is the webhook server with every admission review bounded
// in size, in how many run at once and in time. Conversion (/convert) is
// left to controller-runtime's own limit: the apiserver converts a list
// page in one review, which may be larger than any one object.
// With clientCerts (--webhook-client-ca-file), every path but conversion's
// first refuses, unread, a request sent without a verified client
// certificate.
type guardedServer struct {
	webhook.Server
	slots       chan struct{}
	clientCerts bool
}

func newGuardedServer(s webhook.Server, clientCerts bool) guardedServer {
	return guardedServer{Server: s, slots: make(chan struct{}, maxReviewsAtOnce), clientCerts: clientCerts}
}

// Register registers hook at path, guarded when it validates.
func (s guardedServer) Register(path string, hook http.Handler) {
	if strings.HasPrefix(path, "/validate-") {
		hook = guardReview(hook, s.slots, maxReviewBytes, reviewDeadline)
	}
	if s.clientCerts && path != webhookauth.ConversionPath {
		hook = webhookauth.Require(hook)
	}
	s.Server.Register(path, hook)
}

// guardReview refuses a review larger than limit before reading it, waits
// for one of slots, and gives the review a deadline.
func guardReview(hook http.Handler, slots chan struct{}, limit int64, deadline time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			http.Error(w, fmt.Sprintf("an admission review of %d bytes: the limit is %d", r.ContentLength, limit), http.StatusRequestEntityTooLarge)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), deadline)
		defer cancel()
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
		case <-ctx.Done():
			http.Error(w, "too many admission reviews at once; try again", http.StatusServiceUnavailable)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		hook.ServeHTTP(w, r.WithContext(ctx))
	})
}
