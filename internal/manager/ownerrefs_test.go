package manager_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
	"github.com/deckhand-dev/deckhand/internal/manager"
)

// Where the apiserver enforces owner-reference permissions (OpenShift, or
// OwnerReferencesPermissionEnforcement, which the test control plane
// enables), an owner reference with blockOwnerDeletion needs update on the
// owner's finalizers. Every child a controller makes carries one; the
// manager's generated role must let it write each, or the kind silently
// stops working on such clusters (PodIncidents once did).
func TestTheManagerRoleMaySetBlockOwnerDeletionOnEveryChild(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	managerClient := asManagerRole(t)

	set := &appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "set"}, Spec: appsv1beta1.PodSetSpec{Replicas: 0}}
	box := &modelv1.ModelBox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "box"}, Spec: modelv1.ModelBoxSpec{Name: "app", Image: "nginx:1.28.0"}}
	pb := &debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pb"}, Spec: debugv1beta1.PodBuggerSpec{Image: "busybox:1.36", Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}}}
	env.WithoutValidation(t, "vpodset-v1beta1.apps.deckhand.dev", "vpodbugger-v1beta1.debug.deckhand.dev")
	for _, owner := range []client.Object{set, box, pb} {
		if err := env.Client.Create(ctx, owner); err != nil {
			t.Fatalf("creating the owner %T: %v", owner, err)
		}
	}
	ownedBy := func(owner client.Object, kind string, gv string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, GenerateName: "child-", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: gv, Kind: kind, Name: owner.GetName(), UID: owner.GetUID(),
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}}}
	}
	now := metav1.NewTime(time.Now())
	children := map[string]client.Object{
		"PodSet's pod": &corev1.Pod{ObjectMeta: ownedBy(set, "PodSet", appsv1beta1.GroupVersion.String()),
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox:1.36"}}}},
		"ModelBox's Deployment": &appsv1.Deployment{ObjectMeta: ownedBy(box, "ModelBox", modelv1.GroupVersion.String()),
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "box"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "box"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "nginx:1.28.0"}}}}}},
		"PodBugger's PodIncident": &debugv1beta1.PodIncident{ObjectMeta: ownedBy(pb, "PodBugger", debugv1beta1.GroupVersion.String()),
			Spec: debugv1beta1.PodIncidentSpec{PodBugger: pb.Name, Pod: debugv1beta1.IncidentPod{Name: "app", UID: "0000"},
				Reason: debugv1beta1.IncidentError, Count: 1, FirstTime: now, LastTime: now}},
	}
	for name, child := range children {
		if err := managerClient.Create(ctx, child); err != nil {
			t.Errorf("the manager's role cannot create the %s: %v", name, err)
		}
	}
}

// asManagerRole returns a client for a user bound to the manager's generated
// ClusterRole (config/rbac/role.yaml) and nothing else.
func asManagerRole(t *testing.T) client.Client {
	t.Helper()
	ctx := t.Context()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(data, role); err != nil {
		t.Fatalf("reading the manager's role: %v", err)
	}
	name := "deckhand-manager-" + env.Namespace(t)
	role.ObjectMeta = metav1.ObjectMeta{Name: name}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: name}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s: %v", obj.GetName(), err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), obj) })
	}
	c, err := client.New(env.UserConfig(t, name), client.Options{Scheme: manager.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	// The apiserver's authorizer learns of the binding through a watch.
	NewWithT(t).Eventually(func() error {
		return c.List(ctx, &corev1.PodList{}, client.Limit(1))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	return c
}
