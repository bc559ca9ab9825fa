package modelbox_test

import (
	"encoding/json"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
	modelboxcontroller "github.com/deckhand-dev/deckhand/internal/controller/modelbox"
	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/internal/testenv/faultinject"
)

// A cache that still shows a child the user has since deleted and replaced
// with an object of their own, of the same name, must not make the
// ModelBox apply over the user's object: the apply carries the UID of the
// child it means, and the apiserver refuses it for any other.
func TestStaleChildIsNotMistakenForTheUsersObjectOfItsName(t *testing.T) {
	g, box, child := boxWithStaleCache(t, 30031)
	ns, key := box.Namespace, client.ObjectKeyFromObject(box)

	// The user replaces the child by a Service of their own, and changes
	// the ModelBox's port, which the child would have to follow.
	g.Expect(env.Client.Delete(ctx, child)).To(Succeed())
	users := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "mine"}, Ports: []corev1.ServicePort{{Port: 8080}}}}
	env.Create(t, users)
	g.Expect(env.Update(box, func() { box.Spec.Ports[0].Port = 8080; box.Spec.Ports[0].NodePort = 0 })).To(Succeed())

	// A reconcile whose cache still shows the child.
	stale := faultinject.StaleGets(env.Client, child)
	r := modelboxcontroller.NewModelBoxReconciler(stale, env.Client, events.NewFakeRecorder(100))
	_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
	g.Expect(get(key, &corev1.Service{})()).To(And(
		HaveField("UID", users.UID),
		HaveField("OwnerReferences", BeEmpty()),
		HaveField("Spec.Selector", Equal(map[string]string{"app": "mine"}))), "the user's Service was taken over")
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "reconcile: %v", err)
}

// A cache that still shows a child the user has since replaced with an
// object of their own, of the same name, must not make the ModelBox delete
// the user's object when it stops wanting the child: the delete carries
// the UID of the child it means.
func TestStaleChildIsNotDeletedInPlaceOfTheUsersObject(t *testing.T) {
	g, box, child := boxWithStaleCache(t, 30033)
	ns, key := box.Namespace, client.ObjectKeyFromObject(box)

	// The user replaces the child by a Service of their own, and the
	// ModelBox stops wanting a Service (no ports).
	g.Expect(env.Client.Delete(ctx, child)).To(Succeed())
	users := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "mine"}, Ports: []corev1.ServicePort{{Port: 8080}}}}
	env.Create(t, users)
	g.Expect(env.Update(box, func() { box.Spec.Ports = nil })).To(Succeed())

	stale := faultinject.StaleGets(env.Client, child)
	_, err := modelboxcontroller.NewModelBoxReconciler(stale, env.Client, events.NewFakeRecorder(100)).
		Reconcile(ctx, ctrl.Request{NamespacedName: key})
	g.Expect(get(key, &corev1.Service{})()).To(HaveField("UID", users.UID), "the user's Service was deleted")
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "reconcile: %v", err)
}

// Every kind of child can name the object it means by UID.
func TestSetUIDNamesEveryKindOfChild(t *testing.T) {
	box := seedBox("ns", 30000)
	box.Spec.Replicas = nil
	box.Spec.Autoscaling = &modelv1.Autoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 4}
	children, err := modelboxcontroller.ChildrenFor(box, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(children) != 4 {
		t.Fatalf("%d children, want the 4 kinds", len(children))
	}
	for _, ac := range children {
		modelboxcontroller.SetUID(ac, "the-uid")
		data, err := json.Marshal(ac)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), `"uid":"the-uid"`) {
			t.Errorf("%T: no uid in %s", ac, data)
		}
	}
}

// A cache that still shows a child deleted since does not stop the
// ModelBox from making it again.
func TestStaleDeletedChildIsMadeAgain(t *testing.T) {
	g, box, child := boxWithStaleCache(t, 30032)
	key := client.ObjectKeyFromObject(box)
	g.Expect(env.Client.Delete(ctx, child)).To(Succeed())
	g.Expect(env.Update(box, func() { box.Spec.Ports[0].Port = 8080; box.Spec.Ports[0].NodePort = 0 })).To(Succeed())

	stale := faultinject.StaleGets(env.Client, child)
	_, err := modelboxcontroller.NewModelBoxReconciler(stale, env.Client, events.NewFakeRecorder(100)).
		Reconcile(ctx, ctrl.Request{NamespacedName: key})
	t.Logf("reconcile on the stale cache: %v", err)
	_, err = modelboxcontroller.NewModelBoxReconciler(env.Client, env.Client, events.NewFakeRecorder(100)).
		Reconcile(ctx, ctrl.Request{NamespacedName: key})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(get(key, &corev1.Service{})()).To(And(
		HaveField("OwnerReferences", ContainElement(HaveField("UID", box.UID))),
		HaveField("Spec.Ports", ConsistOf(HaveField("Port", BeEquivalentTo(8080))))))
}

// boxWithStaleCache makes a seed ModelBox with the node port, waits until
// a manager made its Service, and stops that manager: what the test then
// changes, no cache has seen. It returns the ModelBox and its Service.
func boxWithStaleCache(t *testing.T, nodePort int32) (Gomega, *modelv1.ModelBox, *corev1.Service) {
	t.Helper()
	g := testenv.NewG(t)
	_, stop := env.StartManager(t, env.ManagerOptions())
	box := seedBox(env.Namespace(t), nodePort)
	env.Create(t, box)
	child := &corev1.Service{}
	g.Eventually(get(client.ObjectKeyFromObject(box), child)).Should(HaveField("OwnerReferences", ContainElement(HaveField("UID", box.UID))))
	stop()
	return g, box, child
}
