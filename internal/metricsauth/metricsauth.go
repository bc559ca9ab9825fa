// Package metricsauth guards the manager's metrics endpoint: a request
// needs a bearer token the apiserver accepts (a TokenReview) for a user the
// apiserver allows to get the path (a SubjectAccessReview), as the
// kube-rbac-proxy sidecar and controller-runtime's filters do.
//
// It is Deckhand's own rather than controller-runtime's
// filters.WithAuthenticationAndAuthorization because that filter brings
// k8s.io/apiserver's authentication stack with it (CEL, gRPC,
// OpenTelemetry, OpenAPI): 40 MB of the manager's 92 MB binary and 17 MiB
// of its resident memory, for two API calls and a cache. The behaviour is
// the same: tokens only (no anonymous access), reviews cached for a minute
// (authentication), five minutes (allowed) and 30 seconds (denied).
package metricsauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// How long review answers are reused, as in controller-runtime's filter.
const (
	tokenTTL = time.Minute
	allowTTL = 5 * time.Minute
	denyTTL  = 30 * time.Second
	// maxEntries bounds each cache: a flood of made-up tokens costs reviews,
	// not memory.
	maxEntries = 1024
	// reviewTimeout bounds one review with its retries.
	reviewTimeout = 10 * time.Second
)

// retry is the backoff between tries of a review that failed to reach the
// apiserver (the apiserver's own webhook authenticator's).
var retry = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// Filter is a metricsserver.FilterProvider: the manager's Metrics.FilterProvider.
func Filter(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	return FilterFor(nil)(cfg, httpClient)
}

// FilterFor is Filter accepting only tokens issued for one of audiences
// (any token the apiserver accepts when there are none).
func FilterFor(audiences []string) func(*rest.Config, *http.Client) (metricsserver.Filter, error) {
	return func(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
		authn, err := authenticationclient.NewForConfigAndClient(cfg, httpClient)
		if err != nil {
			return nil, err
		}
		authz, err := authorizationclient.NewForConfigAndClient(cfg, httpClient)
		if err != nil {
			return nil, err
		}
		g := New(authn.TokenReviews(), authz.SubjectAccessReviews())
		g.Audiences = audiences
		return func(log logr.Logger, next http.Handler) (http.Handler, error) {
			return g.Handler(log, next), nil
		}, nil
	}
}

// TokenReviews is how a Guard asks who a token belongs to.
type TokenReviews interface {
	Create(ctx context.Context, r *authenticationv1.TokenReview, opts metav1.CreateOptions) (*authenticationv1.TokenReview, error)
}

// SubjectAccessReviews is how a Guard asks what a user may do.
type SubjectAccessReviews interface {
	Create(ctx context.Context, r *authorizationv1.SubjectAccessReview, opts metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error)
}

// Guard authenticates and authorizes requests through the apiserver and
// remembers its answers for a while.
type Guard struct {
	tokens TokenReviews
	access SubjectAccessReviews
	// Now is the clock the caches expire by.
	Now func() time.Time
	// Audiences, when set, are the audiences a token must be issued for:
	// each review asks the apiserver for them, so a token meant for the
	// apiserver itself (every pod's mounted one) is refused, and a scraper's
	// token sent here is good for nothing else.
	Audiences []string

	mu sync.Mutex
	// users are the tokens the apiserver accepted, by hash; rejected the
	// ones it did not. Apart, so that a flood of made-up tokens, which
	// anyone who reaches the port can send, fills and empties only rejected
	// and never flushes the reviews of the scrapers' tokens.
	users    map[[sha256.Size]byte]cached[*authenticationv1.UserInfo]
	rejected map[[sha256.Size]byte]cached[bool]
	allowed  map[string]cached[bool]
}

type cached[T any] struct {
	value   T
	expires time.Time
}

// New returns a Guard making its reviews through tokens and access.
func New(tokens TokenReviews, access SubjectAccessReviews) *Guard {
	return &Guard{tokens: tokens, access: access, Now: time.Now,
		users: map[[sha256.Size]byte]cached[*authenticationv1.UserInfo]{}, rejected: map[[sha256.Size]byte]cached[bool]{},
		allowed: map[string]cached[bool]{}}
}

// Handler serves next to requests whose bearer token belongs to a user
// allowed the request's verb on its path: 401 without such a token, 403
// for a user not allowed, 500 when the apiserver cannot say.
func (g *Guard) Handler(log logr.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ctx, cancel := context.WithTimeout(req.Context(), reviewTimeout)
		defer cancel()
		user, err := g.authenticate(ctx, bearerToken(req))
		switch {
		case err != nil:
			log.Error(err, "Authentication failed")
			http.Error(w, "Authentication failed", http.StatusInternalServerError)
			return
		case user == nil:
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		verb, path := strings.ToLower(req.Method), req.URL.Path
		ok, err := g.authorize(ctx, user, verb, path)
		switch {
		case err != nil:
			msg := "Authorization for user " + user.Username + " failed"
			log.Error(err, msg)
			http.Error(w, msg, http.StatusInternalServerError)
			return
		case !ok:
			http.Error(w, "Authorization denied for user "+user.Username, http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, req)
	})
}

// bearerToken is the request's bearer token, empty without one.
func bearerToken(req *http.Request) string {
	scheme, token, found := strings.Cut(strings.TrimSpace(req.Header.Get("Authorization")), " ")
	if !found || !strings.EqualFold(scheme, "bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// authenticate returns the token's user, nil when the apiserver does not
// accept the token (or there is none).
func (g *Guard) authenticate(ctx context.Context, token string) (*authenticationv1.UserInfo, error) {
	if token == "" {
		return nil, nil
	}
	key := sha256.Sum256([]byte(token))
	if user, ok := lookup(g, g.users, key); ok {
		return user, nil
	}
	if _, ok := lookup(g, g.rejected, key); ok {
		return nil, nil
	}
	var review *authenticationv1.TokenReview
	err := withRetries(ctx, func() (err error) {
		review, err = g.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: g.Audiences}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reviewing a token: %w", err)
	}
	// An apiserver that ignores the audiences asked for answers with none:
	// such an answer does not say the token is meant for us.
	if !review.Status.Authenticated || (len(g.Audiences) > 0 && !slices.ContainsFunc(review.Status.Audiences, func(a string) bool { return slices.Contains(g.Audiences, a) })) {
		store(g, g.rejected, key, true, tokenTTL)
		return nil, nil
	}
	store(g, g.users, key, &review.Status.User, tokenTTL)
	return &review.Status.User, nil
}

// authorize asks whether user may verb path.
func (g *Guard) authorize(ctx context.Context, user *authenticationv1.UserInfo, verb, path string) (bool, error) {
	key := accessKey(user, verb, path)
	if ok, found := lookup(g, g.allowed, key); found {
		return ok, nil
	}
	extra := make(map[string]authorizationv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	var review *authorizationv1.SubjectAccessReview
	err := withRetries(ctx, func() (err error) {
		review, err = g.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
		}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("reviewing access of %s to %s %s: %w", user.Username, verb, path, err)
	}
	ok := review.Status.Allowed && !review.Status.Denied
	ttl := denyTTL
	if ok {
		ttl = allowTTL
	}
	store(g, g.allowed, key, ok, ttl)
	return ok, nil
}

// accessKey names a user's request for the access cache: everything the
// review is asked about.
func accessKey(user *authenticationv1.UserInfo, verb, path string) string {
	var b strings.Builder
	for _, s := range []string{user.Username, user.UID, verb, path} {
		fmt.Fprintf(&b, "%q ", s)
	}
	fmt.Fprintf(&b, "%q ", user.Groups)
	keys := make([]string, 0, len(user.Extra))
	for k := range user.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%q=%q ", k, []string(user.Extra[k]))
	}
	return b.String()
}

// withRetries calls review until it succeeds, fails for good, the backoff
// runs out or ctx ends.
func withRetries(ctx context.Context, review func() error) error {
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, retry, func(context.Context) (bool, error) {
		if last = review(); last != nil && !transient(last) {
			return false, last
		}
		return last == nil, nil
	})
	if err != nil && last != nil {
		return last
	}
	return err
}

// transient says whether a failed review may succeed when tried again:
// no answer, a server error or too many requests; not a refusal.
func transient(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code >= http.StatusInternalServerError || code == http.StatusTooManyRequests
	}
	return true
}

func lookup[K comparable, V any](g *Guard, m map[K]cached[V], key K) (V, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := m[key]
	if !ok || !g.Now().Before(c.expires) {
		var zero V
		return zero, false
	}
	return c.value, true
}

func store[K comparable, V any](g *Guard, m map[K]cached[V], key K, value V, ttl time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.Now()
	if len(m) >= maxEntries {
		for k, c := range m {
			if !now.Before(c.expires) {
				delete(m, k)
			}
		}
		if len(m) >= maxEntries {
			clear(m)
		}
	}
	m[key] = cached[V]{value: value, expires: now.Add(ttl)}
}
