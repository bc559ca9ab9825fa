package modelbox_test

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
	modelboxcontroller "github.com/deckhand-dev/deckhand/internal/controller/modelbox"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// A child unchanged since a pass found it matching is not compared again
// (reading Deckhand's fields out of its managedFields costs the manager
// most of its CPU while ModelBoxes roll out): the Deployment's status
// updates, most of a rollout's passes, change nothing Deckhand owns. An
// edit to the child, even one that only takes Deckhand's ownership away,
// is still seen and undone.
func TestChildUnchangedSinceItMatchedIsNotComparedAgain(t *testing.T) {
	g := testenv.NewG(t)
	box := seedBox(env.Namespace(t), 30023)
	env.Create(t, box)
	key := client.ObjectKeyFromObject(box)
	// No manager runs: each pass is this reconciler's, on what the
	// apiserver holds.
	r := modelboxcontroller.NewModelBoxReconciler(env.Client, env.Client, events.NewFakeRecorder(100))
	reconcile := func() {
		t.Helper()
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
		g.Expect(err).NotTo(HaveOccurred())
	}
	reconcile() // creates the Deployment, the Service and the disruption budget
	reconcile() // finds them matching
	compared := modelboxcontroller.FullComparisons(r)
	g.Expect(compared).To(BeEquivalentTo(3))

	// The Deployment controller reports the rollout done.
	deploy := &appsv1.Deployment{}
	g.Expect(env.Client.Get(ctx, key, deploy)).To(Succeed())
	setDeploymentAvailable(g, deploy, 4)
	reconcile()
	g.Expect(get(key, box)()).To(HaveField("Status.Conditions",
		testenv.HaveCondition(modelv1.ConditionAvailable, metav1.ConditionTrue, modelv1.ReasonMinimumReplicasAvailable)))
	g.Expect(modelboxcontroller.FullComparisons(r)).To(Equal(compared), "full comparisons after a status update")

	// Someone edits a label Deckhand sets: compared, and set back.
	g.Expect(env.Update(deploy, func() { deploy.Labels["app.kubernetes.io/name"] = "other" })).To(Succeed())
	reconcile()
	g.Expect(modelboxcontroller.FullComparisons(r)).To(Equal(compared + 1))
	g.Expect(get(key, &appsv1.Deployment{})()).To(HaveField("Labels", HaveKeyWithValue("app.kubernetes.io/name", box.Name)))

	// Someone clears the Service's managedFields, taking every field from
	// Deckhand without changing a value: Deckhand takes its fields back.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	g.Expect(env.Client.Patch(ctx, svc, client.RawPatch(types.JSONPatchType,
		[]byte(`[{"op":"replace","path":"/metadata/managedFields","value":[{}]}]`)))).To(Succeed())
	g.Expect(appliedBy(svc.ManagedFields, modelboxcontroller.FieldManager)).To(BeFalse(), "Deckhand's managedFields entry was not cleared")
	reconcile()
	g.Expect(get(key, svc)()).To(HaveField("ManagedFields", WithTransform(func(m []metav1.ManagedFieldsEntry) bool {
		return appliedBy(m, modelboxcontroller.FieldManager)
	}, BeTrue())))
}

// appliedBy says whether manager's applies own fields of an object.
func appliedBy(entries []metav1.ManagedFieldsEntry, manager string) bool {
	for _, e := range entries {
		if e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}

// A child's fingerprint covers all that the comparison reads (its UID,
// metadata, spec and the fields Deckhand's applies own) and leaves out
// what changes without Deckhand's fields changing: the status, the
// resourceVersion, other field managers' entries.
func TestFingerprintsChangeWithWhatDeckhandCompares(t *testing.T) {
	box := seedBox("ns", 30000)
	box.UID = "box-uid"
	children, err := modelboxcontroller.ChildrenFor(box, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := children[0] // the Deployment
	base := func() *appsv1.Deployment {
		at := metav1.Now()
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: box.Name, UID: "child-uid", ResourceVersion: "7", Generation: 1,
				Labels:          map[string]string{modelboxcontroller.LabelModelBox: box.Name},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "model.deckhand.dev/v1", Kind: "ModelBox", Name: box.Name, UID: box.UID}},
				ManagedFields: []metav1.ManagedFieldsEntry{
					{Manager: modelboxcontroller.FieldManager, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "apps/v1", Time: &at,
						FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:replicas":{}}}`)},
					{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "apps/v1", Time: &at,
						Subresource: "status", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:replicas":{}}}`)},
				}},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](4)},
		}
	}
	tests := map[string]struct {
		change func(d *appsv1.Deployment)
		same   bool
	}{
		"status":          {func(d *appsv1.Deployment) { d.Status.AvailableReplicas = 4 }, true},
		"resourceVersion": {func(d *appsv1.Deployment) { d.ResourceVersion = "8" }, true},
		"another manager": {func(d *appsv1.Deployment) { d.ManagedFields[1].FieldsV1 = metav1.NewFieldsV1(`{"f:status":{}}`) }, true},
		"a manager added": {func(d *appsv1.Deployment) {
			d.ManagedFields = append(d.ManagedFields, metav1.ManagedFieldsEntry{Manager: "hpa"})
		}, true},
		"Deckhand's apply time": {func(d *appsv1.Deployment) { d.ManagedFields[0].Time = &metav1.Time{} }, true},
		"Deckhand's fields":     {func(d *appsv1.Deployment) { d.ManagedFields[0].FieldsV1 = metav1.NewFieldsV1(`{"f:spec":{}}`) }, false},
		"Deckhand's entry gone": {func(d *appsv1.Deployment) { d.ManagedFields = d.ManagedFields[1:] }, false},
		"spec":                  {func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](5) }, false},
		"label":                 {func(d *appsv1.Deployment) { d.Labels["team"] = "web" }, false},
		"annotation":            {func(d *appsv1.Deployment) { d.Annotations = map[string]string{"team": "web"} }, false},
		"owner":                 {func(d *appsv1.Deployment) { d.OwnerReferences = nil }, false},
		"uid":                   {func(d *appsv1.Deployment) { d.UID = "another" }, false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			before, changed := base(), base()
			tt.change(changed)
			a, okA := modelboxcontroller.FingerprintsOf(before, want)
			b, okB := modelboxcontroller.FingerprintsOf(changed, want)
			if !okA || !okB {
				t.Fatal("no fingerprints")
			}
			if (a == b) != tt.same {
				t.Errorf("same fingerprints: %v, want %v", a == b, tt.same)
			}
		})
	}
	t.Run("another wish", func(t *testing.T) {
		box.Spec.Image = "nginx:1.27"
		other, err := modelboxcontroller.ChildrenFor(box, nil)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := modelboxcontroller.FingerprintsOf(base(), want)
		b, _ := modelboxcontroller.FingerprintsOf(base(), other[0])
		if a == b {
			t.Error("same fingerprints for two wishes")
		}
	})
}
