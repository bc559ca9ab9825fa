//go:build faults

package faults_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
	modelboxcontroller "github.com/deckhand-dev/deckhand/internal/controller/modelbox"
)

// The ModelBox invariants.
const (
	checkModelBoxReplicas = "replicas never drop below what the user set"
	checkModelBoxForeign  = "never writes to an object it does not own"
)

func modelBoxScenarios() []scenario {
	return []scenario{{name: "ModelBox hands replicas 4 to an autoscaler", controllers: []string{modelboxcontroller.ControllerName},
		start: modelBoxPlan}}
}

// modelBoxPlan: a ModelBox of 4 replicas whose user turns autoscaling on
// (min 2): the Deployment's replicas pass from Deckhand to the autoscaler
// and must stay 4 all along (envtest runs no autoscaler to change them);
// the user's objects beside it (a Deployment, and a Service and a budget
// with the ModelBox's own label; a Deployment and a Service of the
// ModelBox's name in another namespace) are never written to.
func modelBoxPlan(t *testing.T, f *fixture) plan {
	ctx := context.Background()
	ns, elsewhere := env.Namespace(t), env.Namespace(t)
	key := types.NamespacedName{Namespace: ns, Name: "model"}
	const userReplicas = 4

	foreign := map[types.UID]bool{}
	for _, obj := range userObjects(ns, elsewhere, key.Name) {
		env.Create(t, obj)
		foreign[obj.GetUID()] = true
	}

	stop := f.startPlain()
	env.Create(t, &modelv1.ModelBox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name},
		Spec: modelv1.ModelBoxSpec{Image: "busybox:1", Replicas: ptr.To[int32](userReplicas), Ports: []modelv1.ServicePort{{Port: 8080}}}})
	waitFor(t, "the ModelBox's Deployment", func() error {
		return modelBoxSettled(ctx, key, func(d *appsv1.Deployment) error {
			if d.Spec.Replicas == nil || *d.Spec.Replicas != userReplicas {
				return fmt.Errorf("replicas %v", d.Spec.Replicas)
			}
			return nil
		})
	})
	stop()

	observe(t, deploymentList(ns), func(ev watch.Event) {
		d := ev.Object.(*appsv1.Deployment)
		if d.Name == key.Name && (ev.Type == watch.Deleted || d.Spec.Replicas == nil || *d.Spec.Replicas < userReplicas) {
			f.violate(checkModelBoxReplicas, "Deployment %s: %s with replicas %v", d.Name, ev.Type, ptr.Deref(d.Spec.Replicas, -1))
		}
	})
	for _, n := range []string{ns, elsewhere} {
		for _, gvr := range modelBoxChildKinds {
			observe(t, metadataList(gvr, n), foreignChecks(f, foreign, gvr.Resource))
		}
	}

	return plan{
		trigger: []func() error{func() error {
			box := &modelv1.ModelBox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name}}
			return env.Update(box, func() {
				box.Spec.Replicas = nil
				box.Spec.Autoscaling = &modelv1.Autoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 10}
			})
		}},
		converged: func() error {
			return modelBoxSettled(ctx, key, func(d *appsv1.Deployment) error {
				if err := env.Client.Get(ctx, key, &autoscalingv2.HorizontalPodAutoscaler{}); err != nil {
					return fmt.Errorf("autoscaler: %w", err)
				}
				for _, m := range d.ManagedFields {
					if m.Manager == modelboxcontroller.FieldManager && m.FieldsV1 != nil && containsReplicas(m.FieldsV1.GetRawBytes()) {
						return fmt.Errorf("deckhand still owns the replicas")
					}
				}
				return nil
			})
		},
		final: func() {},
	}
}

// modelBoxSettled is nil once the ModelBox's status describes its
// generation, its Deployment and Service exist, and check passes on the
// Deployment.
func modelBoxSettled(ctx context.Context, key types.NamespacedName, check func(*appsv1.Deployment) error) error {
	box := &modelv1.ModelBox{}
	if err := env.Client.Get(ctx, key, box); err != nil {
		return err
	}
	if box.Status.ObservedGeneration != box.Generation {
		return fmt.Errorf("status describes generation %d of %d", box.Status.ObservedGeneration, box.Generation)
	}
	if err := env.Client.Get(ctx, key, &corev1.Service{}); err != nil {
		return fmt.Errorf("service: %w", err)
	}
	d := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, key, d); err != nil {
		return fmt.Errorf("deployment: %w", err)
	}
	return check(d)
}

// containsReplicas reports whether a managedFields entry's fields include
// spec.replicas.
func containsReplicas(fields []byte) bool {
	return bytes.Contains(fields, []byte(`"f:replicas"`))
}

// userObjects are objects a user made beside a ModelBox called name in ns:
// look-alikes that it does not own.
func userObjects(ns, elsewhere, name string) []client.Object {
	labels := map[string]string{modelboxcontroller.LabelModelBox: name}
	deployment := func(ns, name string, labels map[string]string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "other"}}, Spec: podSpec()}}}
	}
	service := func(ns, name string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "other"}, Ports: []corev1.ServicePort{{Port: 80}}}}
	}
	return []client.Object{
		deployment(ns, "other", map[string]string{"app": name}),
		service(ns, "lookalike"),
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lookalike", Labels: labels},
			Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}}},
		deployment(elsewhere, name, labels),
		service(elsewhere, name),
	}
}

// foreignChecks reports every change to an object of foreign (by UID)
// after it was first seen: nothing else than the ModelBox writes in the
// scenario, and the ModelBox owns none of them.
func foreignChecks(f *fixture, foreign map[types.UID]bool, resource string) func(watch.Event) {
	return func(ev watch.Event) {
		m := ev.Object.(*metav1.PartialObjectMetadata)
		if foreign[m.UID] && ev.Type != watch.Added {
			f.violate(checkModelBoxForeign, "%s %s/%s: %s, owners %v", resource, m.Namespace, m.Name, ev.Type, m.OwnerReferences)
		}
	}
}

// modelBoxChildKinds are the kinds of a ModelBox's children.
var modelBoxChildKinds = []schema.GroupVersionResource{
	appsv1.SchemeGroupVersion.WithResource("deployments"),
	corev1.SchemeGroupVersion.WithResource("services"),
	policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets"),
	autoscalingv2.SchemeGroupVersion.WithResource("horizontalpodautoscalers"),
}

// objects is items as runtime.Objects, pointers into the slice.
func objects[T any, PT interface {
	*T
	runtime.Object
}](items []T) []runtime.Object {
	out := make([]runtime.Object, 0, len(items))
	for i := range items {
		out = append(out, PT(&items[i]))
	}
	return out
}

// metadataList lists and watches the metadata of one resource in ns.
func metadataList(gvr schema.GroupVersionResource, ns string) listWatch {
	mc := metadata.NewForConfigOrDie(env.Config)
	return listWatch{
		list: func(ctx context.Context) (string, []runtime.Object, error) {
			l, err := mc.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return "", nil, err
			}
			return l.ResourceVersion, objects(l.Items), nil
		},
		watch: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return mc.Resource(gvr).Namespace(ns).Watch(ctx, opts)
		},
	}
}

func deploymentList(ns string) listWatch {
	return listWatch{
		list: func(ctx context.Context) (string, []runtime.Object, error) {
			l, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return "", nil, err
			}
			return l.ResourceVersion, objects(l.Items), nil
		},
		watch: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return cs.AppsV1().Deployments(ns).Watch(ctx, opts)
		},
	}
}
