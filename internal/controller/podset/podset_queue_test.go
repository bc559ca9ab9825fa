package podset_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	podsetcontroller "github.com/deckhand-dev/deckhand/internal/controller/podset"
)

// After a start or a failover the pod informer's initial list queues every
// PodSet that has a pod; a PodSet changed meanwhile (scaled by its user) is
// worked on before them, not behind thousands of PodSets whose state did not
// change (controller-runtime#3496). The queue is controller-runtime's
// priority queue, which the manager's controllers run on.
func TestInitialListDoesNotDelayAFreshChange(t *testing.T) {
	g := NewWithT(t)
	q := priorityqueue.New[reconcile.Request]("podset-initial-list")
	defer q.ShutDown()
	r := podsetcontroller.NewPodSetReconciler(env.Client, env.Client, env.EventRecorder(t, podsetcontroller.ControllerName))
	h := r.PodEventHandler()

	for i := range 200 {
		set := fmt.Sprintf("listed-%03d", i)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: set + "-a",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: appsv1beta1.GroupVersion.String(), Kind: "PodSet",
				Name: set, UID: types.UID(set), Controller: ptr.To(true)}}}}
		h.Create(context.Background(), event.CreateEvent{Object: pod, IsInInitialList: true}, q)
	}
	// The change a user made after the restart: the PodSet's own update
	// event, queued as controller-runtime's For handler queues it.
	fresh := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "scaled"}}
	q.Add(fresh)

	first, _, _ := q.GetWithPriority()
	g.Expect(first).To(Equal(fresh))
	// The listed PodSets are all still queued, none lost.
	g.Expect(q.Len()).To(Equal(200))
}

// queued records how a handler queued requests: at once, or after a delay.
type queued struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	now   []reconcile.Request
	after map[reconcile.Request]time.Duration
}

func (q *queued) Add(r reconcile.Request) { q.now = append(q.now, r) }
func (q *queued) AddAfter(r reconcile.Request, d time.Duration) {
	q.after[r] = d
}

// A pod's progress (started, ready) is gathered into one sync of its set
// per 250 ms window while its pods make progress, but the first news after
// a quiet spell, such as the last pod of a set becoming ready, is acted on
// at once: a fixed delay after every event held every set's last status
// 250 ms behind its pods, and after a failover the sets became current
// later than kube-controller-manager's ReplicaSets, which it should not.
func TestPodProgressAfterAQuietSpellIsActedOnAtOnce(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	r := podsetcontroller.NewPodSetReconciler(env.Client, env.Client, env.EventRecorder(t, podsetcontroller.ControllerName))
	r.Now = func() time.Time { return now }
	h := r.PodEventHandler()
	progress := func(set string) {
		starting := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: set + "-a",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: appsv1beta1.GroupVersion.String(), Kind: "PodSet",
				Name: set, UID: types.UID(set), Controller: ptr.To(true)}}}}
		ready := starting.DeepCopy()
		ready.Status.Phase = corev1.PodRunning
		ready.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		q := &queued{after: map[reconcile.Request]time.Duration{}}
		h.Update(context.Background(), event.UpdateEvent{ObjectOld: starting, ObjectNew: ready}, q)
		req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: set}}
		switch set {
		case "quiet":
			g.Expect(q.now).To(ConsistOf(req), "a set last synced a second ago is synced at once")
			g.Expect(q.after).To(BeEmpty())
		case "busy":
			g.Expect(q.now).To(BeEmpty(), "a set synced 100 ms ago gathers its pods' progress")
			g.Expect(q.after).To(HaveKeyWithValue(req, 150*time.Millisecond))
		}
	}
	r.SyncBegan(types.NamespacedName{Namespace: "ns", Name: "quiet"}, now.Add(-time.Second))
	progress("quiet")
	r.SyncBegan(types.NamespacedName{Namespace: "ns", Name: "busy"}, now.Add(-100*time.Millisecond))
	progress("busy")
}
