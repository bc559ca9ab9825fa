package manager_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/internal/testenv/faultinject"
)

// A controller starts once the kinds it reads have synced, not once every
// kind of the manager's cache has: with the pods of a PodSet's namespace
// impossible to list (as a slow list of thousands of pods is, only longer),
// a JobWatcher still deletes its due Job. The manager used to start no
// controller before every kind had synced, so the JobWatcher waited for
// pods it never reads. /readyz still waits for every kind.
func TestAControllerDoesNotWaitForKindsItDoesNotRead(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	opts := env.ManagerOptions()
	_, stop := env.StartManager(t, opts) // its webhooks admit the PodSet and the watcher
	set := &appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "set"}, Spec: appsv1beta1.PodSetSpec{Replicas: 0,
		Template: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "set"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}
	g.Expect(env.Client.Create(ctx, set)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, set) })
	w := &deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"}}
	w.Spec.TTLSecondsAfterSucceeded = ptr.To[int32](0)
	g.Expect(env.Client.Create(ctx, w)).To(Succeed())
	stop()
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "etl"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}
	g.Expect(env.Client.Create(ctx, job)).To(Succeed())
	testenv.FinishJob(job, batchv1.JobComplete, time.Now().Add(-time.Minute))
	g.Expect(env.Client.Status().Update(ctx, job)).To(Succeed())

	outage := faultinject.NewOutage("/pods")
	outage.Begin()
	defer outage.End()
	opts.HealthProbeBindAddress = testenv.FreeAddr(t)
	env.StartManagerWithConfig(t, outage.Config(env.Config), opts)

	g.Eventually(env.Exists(job)).WithTimeout(30*time.Second).Should(BeFalse(),
		"the JobWatcher waited for pods it does not read")
	ready := func() (int, error) {
		resp, err := http.Get("http://" + opts.HealthProbeBindAddress + "/readyz")
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		return resp.StatusCode, nil
	}
	g.Expect(ready()).NotTo(Equal(http.StatusOK), "ready with the pods' cache not synced")
	outage.End()
	g.Eventually(ready).WithTimeout(30 * time.Second).Should(Equal(http.StatusOK))
}

// The manager's informers list in pages and never stream their lists: the
// apiserver ends a streamed list only on its once-a-second bookmark timer,
// and the scoped cache's kinds waited for two such bookmarks in a row (the
// watchers that say which namespaces are needed, then the Jobs of those
// namespaces): 1.2 s of a restart's 1.33 s until its first deletion over a
// backlog of 100 Jobs (issue 26).
func TestCachesListInPagesWithoutWaitingForABookmark(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	opts := env.ManagerOptions()
	_, stop := env.StartManager(t, opts) // its webhook admits the watcher
	w := &deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"}}
	w.Spec.TTLSecondsAfterSucceeded = ptr.To[int32](3600)
	g.Expect(env.Client.Create(ctx, w)).To(Succeed())
	stop()
	const jobs = 520 // more than a page
	for i := range jobs {
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprint("job-", i)},
			Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}
		g.Expect(env.Client.Create(ctx, job)).To(Succeed())
	}

	var mu sync.Mutex
	streamed, pages := map[string]int{}, 0
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return faultinject.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			q := req.URL.Query()
			mu.Lock()
			switch {
			case q.Get("sendInitialEvents") == "true":
				streamed[req.URL.Path]++
			case q.Get("watch") == "" && req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/namespaces/"+ns+"/jobs") && q.Get("limit") != "":
				pages++
			}
			mu.Unlock()
			return rt.RoundTrip(req)
		})
	})
	opts.HealthProbeBindAddress = testenv.FreeAddr(t)
	mgr, _ := env.StartManagerWithConfig(t, cfg, opts)
	cached := func() (int, error) {
		var l batchv1.JobList
		err := mgr.GetCache().List(ctx, &l, client.InNamespace(ns))
		return len(l.Items), err
	}
	g.Eventually(cached).WithTimeout(30 * time.Second).Should(Equal(jobs))
	mu.Lock()
	defer mu.Unlock()
	g.Expect(streamed).To(BeEmpty(), "informers streamed their lists, each waiting for the apiserver's bookmark")
	g.Expect(pages).To(Equal(2), "the namespace's Jobs were not listed in pages of 500")
}

// A controller's source waits for its own handler to be told the initial
// list, not for client-go's 100 ms poll of it: controller-runtime asks the
// handler whether it has synced once the cache's wait returns, and when the
// cache's wait returned as soon as the informer synced (the handler still at
// work) the source waited for the next poll, 100 ms later, on top of the
// cache's own 100 ms poll: 0.2 s of a restart's 0.63 s over a backlog of 100
// Jobs (issue 26). Here the handler is held at its first event until well
// after the informer synced; the source asks it once.
func TestASourceWaitsForItsHandlerNotForAPoll(t *testing.T) {
	g := NewWithT(t)
	mgr, _ := env.StartManager(t, env.ManagerOptions())
	var asked atomic.Int32
	release := make(chan struct{})
	var first sync.Once
	src := source.Kind(countingCache{Cache: mgr.GetCache(), asked: &asked}, client.Object(&corev1.Namespace{}), handler.Funcs{
		CreateFunc: func(context.Context, event.CreateEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			first.Do(func() { <-release })
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	g.Expect(src.Start(ctx, q)).To(Succeed())
	time.AfterFunc(500*time.Millisecond, func() { close(release) })
	g.Expect(src.WaitForSync(ctx)).To(Succeed())
	g.Expect(asked.Load()).To(BeEquivalentTo(1), "the source found its handler not synced and polled it again")
}

// countingCache counts how often the handlers added to its informers are
// asked whether they have synced.
type countingCache struct {
	cache.Cache
	asked *atomic.Int32
}

func (c countingCache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	inf, err := c.Cache.GetInformer(ctx, obj, opts...)
	if err != nil {
		return nil, err
	}
	return countingInformer{Informer: inf, asked: c.asked}, nil
}

type countingInformer struct {
	cache.Informer
	asked *atomic.Int32
}

func (i countingInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, opts toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	reg, err := i.Informer.AddEventHandlerWithOptions(h, opts)
	return countingRegistration{ResourceEventHandlerRegistration: reg, asked: i.asked}, err
}

type countingRegistration struct {
	toolscache.ResourceEventHandlerRegistration
	asked *atomic.Int32
}

func (r countingRegistration) HasSynced() bool {
	r.asked.Add(1)
	return r.ResourceEventHandlerRegistration.HasSynced()
}
