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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
	modelcontroller "github.com/deckhand-dev/deckhand/internal/controller/model"
)

// The ModelBox invariants.
const (
	checkModelBoxReplicas = "replicas never drop below what the user set"
	checkModelBoxForeign  = "never touches a Deployment it does not own"
)

func modelBoxScenarios() []scenario {
	return []scenario{{name: "ModelBox hands replicas 4 to an autoscaler", controllers: []string{modelcontroller.ControllerName},
		start: modelBoxPlan}}
}

// modelBoxPlan: a ModelBox of 4 replicas whose user turns autoscaling on
// (min 2): the Deployment's replicas pass from Deckhand to the autoscaler
// and must stay 4 all along (envtest runs no autoscaler to change them);
// a Deployment of another owner beside it is left alone.
func modelBoxPlan(t *testing.T, f *fixture) plan {
	ctx := context.Background()
	ns := env.Namespace(t)
	key := types.NamespacedName{Namespace: ns, Name: "model"}
	const userReplicas = 4

	foreign := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other", Labels: map[string]string{"app": "model"}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "other"}}, Spec: podSpec("busybox:1")}}}
	env.Create(t, foreign)

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
		switch d.Name {
		case foreign.Name:
			if ev.Type != watch.Added || d.Generation != 1 {
				f.violate(checkModelBoxForeign, "Deployment %s: %s, generation %d", d.Name, ev.Type, d.Generation)
			}
		case key.Name:
			if ev.Type == watch.Deleted || d.Spec.Replicas == nil || *d.Spec.Replicas < userReplicas {
				f.violate(checkModelBoxReplicas, "Deployment %s: %s with replicas %v", d.Name, ev.Type, ptr.Deref(d.Spec.Replicas, -1))
			}
		}
	})

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
					if m.Manager == modelcontroller.FieldManager && m.FieldsV1 != nil && containsReplicas(m.FieldsV1.GetRawBytes()) {
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

func deploymentList(ns string) listWatch {
	return listWatch{
		list: func(ctx context.Context) (string, []runtime.Object, error) {
			l, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return "", nil, err
			}
			out := make([]runtime.Object, 0, len(l.Items))
			for i := range l.Items {
				out = append(out, &l.Items[i])
			}
			return l.ResourceVersion, out, nil
		},
		watch: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return cs.AppsV1().Deployments(ns).Watch(ctx, opts)
		},
	}
}
