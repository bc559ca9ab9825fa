package scopedcache_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/deckhand-dev/deckhand/internal/manager"
	"github.com/deckhand-dev/deckhand/internal/scopedcache"
)

// Waiting for a cache checks its informers every few milliseconds, not on
// client-go's 100 ms poll, which made every start wait up to a tick after
// its informers synced, twice for a kind held per namespace (issue 26).
// Here an informer's list is held for 300 ms: the wait checks it many
// times, client-go's poll three or four.
func TestWaitingForACacheChecksOftenerThanClientGosPoll(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	release := make(chan struct{})
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/configmaps") && req.URL.Query().Get("watch") == "" {
				<-release
			}
			return rt.RoundTrip(req)
		})
	})
	var checks atomic.Int32
	opts := cache.Options{Scheme: manager.Scheme,
		NewInformer: func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, idx toolscache.Indexers) toolscache.SharedIndexInformer {
			return countingSync{SharedIndexInformer: toolscache.NewSharedIndexInformer(lw, obj, resync, idx), checks: &checks}
		}}
	opts.NewInformer = scopedcache.InPages(opts) // lists, as the manager's informers do
	c, err := cache.New(cfg, opts)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.GetInformer(ctx, &corev1.ConfigMap{})
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = c.Start(ctx) }()
	time.AfterFunc(300*time.Millisecond, func() { close(release) })

	g.Expect(scopedcache.InnerSynced(ctx, c)).To(BeTrue())
	g.Expect(checks.Load()).To(BeNumerically(">", 10), "the wait checked the informer at client-go's pace")
}

// countingSync counts the checks of whether the informer has synced.
type countingSync struct {
	toolscache.SharedIndexInformer
	checks *atomic.Int32
}

func (i countingSync) HasSynced() bool {
	i.checks.Add(1)
	return i.SharedIndexInformer.HasSynced()
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
