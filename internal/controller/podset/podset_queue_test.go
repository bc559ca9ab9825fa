package podset_test

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
