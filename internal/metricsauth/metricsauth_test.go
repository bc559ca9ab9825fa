package metricsauth_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/deckhand-dev/deckhand/internal/metricsauth"
)

// apiserver answers reviews as a cluster would: tokens map to users, and
// allowed lists who may get /metrics. It counts the reviews it is asked
// for, and fails the next ones with errs.
type apiserver struct {
	users   map[string]authenticationv1.UserInfo
	allowed map[string]bool
	errs    []error

	tokenReviews, accessReviews int
}

func (a *apiserver) nextErr() error {
	if len(a.errs) == 0 {
		return nil
	}
	err := a.errs[0]
	a.errs = a.errs[1:]
	return err
}

type tokenReviews struct{ *apiserver }

func (a tokenReviews) Create(_ context.Context, r *authenticationv1.TokenReview, _ metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	a.tokenReviews++
	if err := a.nextErr(); err != nil {
		return nil, err
	}
	user, ok := a.users[r.Spec.Token]
	r.Status = authenticationv1.TokenReviewStatus{Authenticated: ok, User: user}
	return r, nil
}

type accessReviews struct{ *apiserver }

func (a accessReviews) Create(_ context.Context, r *authorizationv1.SubjectAccessReview, _ metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error) {
	a.accessReviews++
	if err := a.nextErr(); err != nil {
		return nil, err
	}
	attrs := r.Spec.NonResourceAttributes
	r.Status.Allowed = a.allowed[r.Spec.User] && attrs != nil && attrs.Path == "/metrics" && attrs.Verb == "get"
	return r, nil
}

// setup is a guarded handler, its apiserver and a clock the test moves.
func setup() (http.Handler, *apiserver, *time.Time) {
	a := &apiserver{
		users: map[string]authenticationv1.UserInfo{
			"reader-token":   {Username: "system:serviceaccount:monitoring:prometheus", Groups: []string{"system:serviceaccounts"}},
			"stranger-token": {Username: "system:serviceaccount:default:stranger"},
		},
		allowed: map[string]bool{"system:serviceaccount:monitoring:prometheus": true},
	}
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	g := metricsauth.New(tokenReviews{a}, accessReviews{a})
	g.Now = func() time.Time { return now }
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics")) })
	return g.Handler(logr.Discard(), metrics), a, &now
}

func get(h http.Handler, authorization string) int {
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

func TestOnlyAllowedTokensGetMetrics(t *testing.T) {
	h, _, _ := setup()
	for _, tc := range []struct {
		name, authorization string
		want                int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"not a bearer token", "Basic cmVhZGVyOnNlY3JldA==", http.StatusUnauthorized},
		{"a token the apiserver does not know", "Bearer made-up", http.StatusUnauthorized},
		{"a user not allowed", "Bearer stranger-token", http.StatusForbidden},
		{"an allowed user", "Bearer reader-token", http.StatusOK},
		{"an allowed user, scheme in lower case", "bearer reader-token", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(get(h, tc.authorization)).To(Equal(tc.want))
		})
	}
}

func TestReviewsAreReusedUntilTheyExpire(t *testing.T) {
	g := NewWithT(t)
	h, a, now := setup()
	reviews := func() []int { return []int{a.tokenReviews, a.accessReviews} }

	g.Expect(get(h, "Bearer reader-token")).To(Equal(http.StatusOK))
	g.Expect(reviews()).To(Equal([]int{1, 1}))
	for range 10 {
		g.Expect(get(h, "Bearer reader-token")).To(Equal(http.StatusOK))
	}
	g.Expect(reviews()).To(Equal([]int{1, 1}), "scrapes within the minute cost no review")

	*now = now.Add(61 * time.Second)
	g.Expect(get(h, "Bearer reader-token")).To(Equal(http.StatusOK))
	g.Expect(reviews()).To(Equal([]int{2, 1}), "the token is reviewed again after a minute, the access after five")
	*now = now.Add(4 * time.Minute)
	g.Expect(get(h, "Bearer reader-token")).To(Equal(http.StatusOK))
	g.Expect(reviews()).To(Equal([]int{3, 2}))

	// A denial is kept for 30 seconds only: RBAC granted meanwhile counts.
	g.Expect(get(h, "Bearer stranger-token")).To(Equal(http.StatusForbidden))
	a.allowed["system:serviceaccount:default:stranger"] = true
	g.Expect(get(h, "Bearer stranger-token")).To(Equal(http.StatusForbidden))
	*now = now.Add(31 * time.Second)
	g.Expect(get(h, "Bearer stranger-token")).To(Equal(http.StatusOK))

	// An unknown token is also remembered: a client retrying with it does
	// not cost a review each time.
	before := a.tokenReviews
	g.Expect(get(h, "Bearer made-up")).To(Equal(http.StatusUnauthorized))
	g.Expect(get(h, "Bearer made-up")).To(Equal(http.StatusUnauthorized))
	g.Expect(a.tokenReviews).To(Equal(before + 1))
}

func TestAccessIsReviewedForEachIdentity(t *testing.T) {
	g := NewWithT(t)
	h, a, _ := setup()
	g.Expect(get(h, "Bearer reader-token")).To(Equal(http.StatusOK))
	// Same name, other groups (a token with other claims): its own review.
	a.users["reader-token-2"] = authenticationv1.UserInfo{Username: "system:serviceaccount:monitoring:prometheus", Groups: []string{"other"}}
	g.Expect(get(h, "Bearer reader-token-2")).To(Equal(http.StatusOK))
	g.Expect(a.accessReviews).To(Equal(2))
}

func TestAReviewThatFailsIsRetriedOnlyWhenItMaySucceed(t *testing.T) {
	g := NewWithT(t)
	h, a, _ := setup()
	a.errs = []error{apierrors.NewServiceUnavailable("etcd is restarting"), errors.New("connection refused")}
	g.Expect(get(h, "Bearer reader-token")).To(Equal(http.StatusOK), "the apiserver came back within the retries")
	g.Expect(a.tokenReviews).To(Equal(3))

	h, a, _ = setup()
	a.errs = []error{apierrors.NewForbidden(schema.GroupResource{Group: "authentication.k8s.io", Resource: "tokenreviews"}, "", errors.New("RBAC"))}
	g.Expect(get(h, "Bearer reader-token")).To(Equal(http.StatusInternalServerError),
		"a manager that may not review tokens says so at once")
	g.Expect(a.tokenReviews).To(Equal(1))
}

// Anyone who reaches the port can send tokens. Made-up ones are reviewed
// (and their rejection cached), but a flood of them must not flush the
// cached review of a scraper's token: its next scrape needs no new review.
func TestMadeUpTokensDoNotFlushTheScrapersReviews(t *testing.T) {
	g := NewWithT(t)
	h, a, _ := setup()
	g.Expect(get(h, "Bearer reader-token")).To(Equal(http.StatusOK))
	for i := range 3000 {
		g.Expect(get(h, fmt.Sprintf("Bearer made-up-%d", i))).To(Equal(http.StatusUnauthorized))
	}
	before := a.tokenReviews
	g.Expect(get(h, "Bearer reader-token")).To(Equal(http.StatusOK))
	g.Expect(a.tokenReviews).To(Equal(before), "the scraper's token was reviewed again: the flood flushed its cached review")
}
