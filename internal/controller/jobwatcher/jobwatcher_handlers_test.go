package jobwatcher_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	jobwatchercontroller "github.com/deckhand-dev/deckhand/internal/controller/jobwatcher"
	"github.com/deckhand-dev/deckhand/internal/manager"
	"github.com/deckhand-dev/deckhand/internal/setupoptions"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// A Job event is handed to each of the package's controllers once: the
// JobWatcher controller and the status controllers of both watcher kinds.
// The manager's cache expands each compact Job it hands a handler
// registration (internal/scopedcache/compact.go), so every registration
// more is an expansion more of every Job of a start's initial list; the
// JobWatcher controller's four watches of Jobs were four (issue 26). The
// manager here has a plain cache, whose informer counts the deliveries.
func TestAJobEventReachesEachControllerOnce(t *testing.T) {
	g := testenv.NewG(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := env.Namespace(t)
	counter := &jobDeliveries{namespace: ns, adds: map[string]int{}}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 manager.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		NewCache: func(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
			c, err := cache.New(cfg, opts)
			return countingCache{Cache: c, counter: counter}, err
		},
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(jobwatchercontroller.Setup(mgr, setupoptions.Options{})).To(Succeed())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		g.Expect(<-done).To(Succeed())
	}()
	g.Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue())

	// One Job listed at the start (the initial list), one made after it.
	listed := createJob(t, newJob(ns, "listed"), batchv1.JobComplete, time.Now())
	g.Eventually(func() int { return counter.added(listed.Name) }).Should(BeNumerically(">=", 1))
	late := createJob(t, newJob(ns, "late"), batchv1.JobComplete, time.Now())
	for _, job := range []*batchv1.Job{listed, late} {
		g.Eventually(func() int { return counter.added(job.Name) }).Should(BeNumerically(">=", 3), "Job %s", job.Name)
		g.Consistently(func() int { return counter.added(job.Name) }).WithTimeout(time.Second).Should(Equal(3),
			"Job %s: one delivery per controller (jobwatcher, jobwatcher-status, clusterjobwatcher-status)", job.Name)
	}
}

// jobDeliveries counts, per Job of one namespace, the additions handed to
// the handlers registered on the Job informer.
type jobDeliveries struct {
	namespace string
	mu        sync.Mutex
	adds      map[string]int
}

func (d *jobDeliveries) add(obj any) {
	if job, ok := obj.(*batchv1.Job); ok && job.Namespace == d.namespace {
		d.mu.Lock()
		d.adds[job.Name]++
		d.mu.Unlock()
	}
}

func (d *jobDeliveries) added(name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.adds[name]
}

// countingCache hands out informers whose Job handlers are counted.
type countingCache struct {
	cache.Cache
	counter *jobDeliveries
}

func (c countingCache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	inf, err := c.Cache.GetInformer(ctx, obj, opts...)
	if _, isJob := obj.(*batchv1.Job); !isJob || err != nil {
		return inf, err
	}
	return countingInformer{Informer: inf, counter: c.counter}, nil
}

type countingInformer struct {
	cache.Informer
	counter *jobDeliveries
}

func (i countingInformer) wrap(h toolscache.ResourceEventHandler) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(obj any, initial bool) { i.counter.add(obj); h.OnAdd(obj, initial) },
		UpdateFunc: h.OnUpdate,
		DeleteFunc: h.OnDelete,
	}
}

func (i countingInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.Informer.AddEventHandler(i.wrap(h))
}

func (i countingInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, p time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.Informer.AddEventHandlerWithResyncPeriod(i.wrap(h), p)
}

func (i countingInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.Informer.AddEventHandlerWithOptions(i.wrap(h), o)
}

// The handlers of Job events read the watchers from a memo, not the cache:
// a start over 10,000 Jobs listed them 30,000 times, copying each watcher
// (issue 26). The memo is read once per namespace between two events of
// the watchers, and an event of a watcher makes the next Job event read
// them again, so that it decides with the watcher as it is now.
func TestJobEventsReadTheWatchersOncePerNamespaceBetweenWatcherEvents(t *testing.T) {
	const jobs = 20
	g := testenv.NewG(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	env.StartManager(t, env.ManagerOptions()) // its webhooks admit the watcher; its controllers find no Job due
	listed := make([]*batchv1.Job, 0, jobs)
	for i := range jobs {
		listed = append(listed, createJob(t, newJob(ns, fmt.Sprintf("job-%02d", i)), batchv1.JobComplete, time.Now()))
	}
	reads := &watcherLists{Client: env.Client}
	r := jobwatchercontroller.NewTestJobReconciler(reads, env.Client, nil, env.EventRecorder(t, jobwatchercontroller.ControllerName))
	jobWatchers := jobwatchercontroller.NewStatusReconciler(reads, nil, env.EventRecorder(t, jobwatchercontroller.ControllerName), false, nil, nil)
	deliver := func() priorityqueue.PriorityQueue[reconcile.Request] {
		q := priorityqueue.New[reconcile.Request]("test")
		t.Cleanup(q.ShutDown)
		for _, job := range listed {
			jobwatchercontroller.JobEvents(r).Create(ctx, event.CreateEvent{Object: job, IsInInitialList: true}, q)
		}
		return q
	}

	// No watcher yet: each listed Job is queued at once, at low priority,
	// for Reconcile to judge; the watchers were read once.
	q := deliver()
	g.Expect(q.Len()).To(Equal(jobs))
	g.Expect(reads.count()).To(Equal(2), "a List of JobWatchers and one of ClusterJobWatchers for %d Job events", jobs)

	// A watcher keeping them an hour: until its event is told, the memo
	// holds what was (the event brings the Jobs in its reach back, judged
	// with the watcher as it is); after it, the Jobs are queued for their
	// expiry, in an hour.
	w := jobWatcher(ns, "hour", i32(3600), nil)
	env.Create(t, w)
	q = deliver()
	g.Expect(q.Len()).To(Equal(jobs), "before the watcher's event")
	g.Expect(reads.count()).To(Equal(2))
	jobwatchercontroller.WatcherEvents(r).Create(ctx, event.CreateEvent{Object: w}, priorityqueue.New[reconcile.Request]("watcher-events"))
	q = deliver()
	g.Expect(q.Len()).To(BeZero(), "the listed Jobs expire in an hour")
	g.Expect(reads.count()).To(Equal(4), "read again after the watcher's event, once")

	// The status controller's mapping: the namespace's JobWatchers, read
	// once between events of JobWatchers.
	before := reads.count()
	for _, job := range listed {
		g.Expect(jobwatchercontroller.WatchersOf(ctx, jobWatchers, job)).To(Equal([]reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(w)}}))
	}
	g.Expect(reads.count() - before).To(Equal(1))
	other := jobWatcher(ns, "other", i32(60), nil)
	env.Create(t, other)
	jobwatchercontroller.StatusWatcherEvents(jobWatchers).Create(ctx, event.CreateEvent{Object: other}, priorityqueue.New[reconcile.Request]("status-events"))
	g.Expect(jobwatchercontroller.WatchersOf(ctx, jobWatchers, listed[0])).To(ConsistOf(
		reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)}, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(other)}))
	g.Expect(reads.count() - before).To(Equal(2))
}

// watcherLists counts the Lists of JobWatchers and ClusterJobWatchers made
// through it.
type watcherLists struct {
	client.Client
	n atomic.Int64
}

func (c *watcherLists) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	switch list.(type) {
	case *deckhandbatchv1.JobWatcherList, *deckhandbatchv1.ClusterJobWatcherList:
		c.n.Add(1)
	}
	return c.Client.List(ctx, list, opts...)
}

func (c *watcherLists) count() int { return int(c.n.Load()) }
