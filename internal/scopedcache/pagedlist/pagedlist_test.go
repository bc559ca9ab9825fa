package pagedlist_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/scopedcache/pagedlist"
)

// An informer of Informers reads its list as pages, each transformed before
// the next is read, so the peak is one page of whole objects, not the list;
// and it never streams the list, whose end the apiserver announces only on
// its once-a-second bookmark timer.
func TestInformersListInPagesTransformedAsTheyArrive(t *testing.T) {
	g := NewWithT(t)
	const n = 1201
	transformed := 0
	var atRequest []int // how many objects were transformed when each page was asked for
	var asked []metav1.ListOptions
	lw := pagedPods(n, func(opts metav1.ListOptions) error {
		asked = append(asked, opts)
		atRequest = append(atRequest, transformed)
		return nil
	})
	var handed toolscache.ListerWatcher
	newInformer := pagedlist.Informers(cache.Options{
		ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: {Transform: func(o any) (any, error) {
			transformed++
			p := o.(*corev1.Pod)
			return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}}, nil
		}}},
		NewInformer: func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, idx toolscache.Indexers) toolscache.SharedIndexInformer {
			handed = lw
			return toolscache.NewSharedIndexInformer(lw, obj, resync, idx)
		},
	})
	newInformer(lw, &corev1.Pod{}, 0, toolscache.Indexers{})

	g.Expect(watchlist.DoesClientNotSupportWatchListSemantics(handed)).To(BeTrue(), "the informer would stream its list")
	// What the reflector asks for first: any version, no limit.
	list, err := toolscache.ToListerWatcherWithContext(handed).ListWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "0"})
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(asked).To(HaveLen(3))
	g.Expect(asked[0].ResourceVersion).To(BeEmpty(), "the first page is of the freshest list")
	g.Expect(asked[0].Limit).To(BeEquivalentTo(500))
	g.Expect(asked[2].Continue).To(Equal("1000"))
	g.Expect(atRequest).To(Equal([]int{0, 500, 1000}), "a page was read before the one before it was transformed")
	l := list.(*metav1.List)
	g.Expect(l.ResourceVersion).To(Equal("101"), "the list's version is its first page's")
	g.Expect(l.Items).To(HaveLen(n))
	g.Expect(l.Items[n-1].Object).To(BeAssignableToTypeOf(&metav1.PartialObjectMetadata{}))
}

// pagedPods lists n pods in the pages asked for, each page's version the
// number of lists asked so far plus 100, after asking ask, which may fail
// the request instead.
func pagedPods(n int, ask func(metav1.ListOptions) error) *toolscache.ListWatch {
	lists := 0
	return &toolscache.ListWatch{
		ListWithContextFunc: func(_ context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			lists++
			if err := ask(opts); err != nil {
				return nil, err
			}
			from := 0
			if opts.Continue != "" {
				from, _ = strconv.Atoi(opts.Continue)
			}
			to := min(from+int(opts.Limit), n)
			page := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: fmt.Sprint(100 + lists)}}
			for i := from; i < to; i++ {
				page.Items = append(page.Items, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("p", i)}})
			}
			if to < n {
				page.Continue = strconv.Itoa(to)
			}
			return page, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil },
	}
}

// A list whose version is compacted away while it is read (a page after
// the first answered 410 Expired) starts over once from a fresh first page,
// still in pages, and holds each object once; compacted again, the error
// goes to the reflector, which lists again after its backoff.
func TestAListWhoseVersionExpiredStartsOverOnce(t *testing.T) {
	const n = 1201
	expired := apierrors.NewResourceExpired("The provided continue parameter is too old")
	list := func(expire func(opts metav1.ListOptions, asked int) bool) (runtime.Object, []metav1.ListOptions, error) {
		var asked []metav1.ListOptions
		lw := pagedPods(n, func(opts metav1.ListOptions) error {
			asked = append(asked, opts)
			if expire(opts, len(asked)) {
				return expired
			}
			return nil
		})
		var handed toolscache.ListerWatcher
		pagedlist.Informers(cache.Options{NewInformer: func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, idx toolscache.Indexers) toolscache.SharedIndexInformer {
			handed = lw
			return toolscache.NewSharedIndexInformer(lw, obj, resync, idx)
		}})(lw, &corev1.Pod{}, 0, toolscache.Indexers{})
		out, err := toolscache.ToListerWatcherWithContext(handed).ListWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "0"})
		return out, asked, err
	}

	t.Run("once", func(t *testing.T) {
		g := NewWithT(t)
		out, asked, err := list(func(_ metav1.ListOptions, asked int) bool { return asked == 2 })
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(asked).To(HaveLen(5), "first page, an expired second, then three pages from the start")
		g.Expect(asked[2].Continue).To(BeEmpty(), "the list did not start over")
		g.Expect(asked[2].Limit).To(BeEquivalentTo(500), "the list started over unpaged")
		l := out.(*metav1.List)
		g.Expect(l.ResourceVersion).To(Equal("103"), "the list's version is the fresh first page's")
		names := map[string]bool{}
		for _, item := range l.Items {
			names[item.Object.(*corev1.Pod).Name] = true
		}
		g.Expect(l.Items).To(HaveLen(n), "objects of the abandoned pages kept")
		g.Expect(names).To(HaveLen(n))
	})
	t.Run("twice", func(t *testing.T) {
		g := NewWithT(t)
		_, asked, err := list(func(opts metav1.ListOptions, _ int) bool { return opts.Continue != "" })
		g.Expect(apierrors.IsResourceExpired(err)).To(BeTrue(), "got %v", err)
		g.Expect(asked).To(HaveLen(4), "the list started over more than once")
	})
}
