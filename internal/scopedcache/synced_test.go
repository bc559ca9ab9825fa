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
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/manager"
	"github.com/deckhand-dev/deckhand/internal/scopedcache"
	"github.com/deckhand-dev/deckhand/internal/scopedcache/pagedlist"
	"github.com/deckhand-dev/deckhand/internal/testenv/faultinject"
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
		return faultinject.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
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
	opts.NewInformer = pagedlist.Informers(opts) // lists, as the manager's informers do
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

// A synced cache made of a cache per kind (cache.Options.ByObject, as the
// manager's is) is seen synced at once. A controller-runtime cache picks at
// random between "started" and "context done" when both are ready, once per
// kind's cache: a wait that checked with a context already done was told
// "not synced" by nine caches at once but one time in 512.
func TestACacheOfManyKindsIsSeenSyncedAtOnce(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := env.Namespace(t)
	byObject := map[client.Object]cache.ByObject{}
	for _, o := range []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}, &corev1.Service{}, &corev1.ServiceAccount{},
		&corev1.Pod{}, &corev1.PersistentVolumeClaim{}, &corev1.LimitRange{}, &corev1.ResourceQuota{}} {
		byObject[o] = cache.ByObject{Namespaces: map[string]cache.Config{ns: {}}}
	}
	c, err := cache.New(env.Config, cache.Options{Scheme: manager.Scheme, ByObject: byObject})
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = c.Start(ctx) }()
	g.Expect(c.WaitForCacheSync(ctx)).To(BeTrue())

	soon, stop := context.WithTimeout(ctx, 200*time.Millisecond)
	defer stop()
	g.Expect(scopedcache.InnerSynced(soon, c)).To(BeTrue(), "a synced cache was seen not synced for 200 ms")
}
