//go:build bench

package bench

import (
	"encoding/json"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
)

func init() { scaleRows["scale-modelbox"] = (*bench).scaleModelBoxRow }

// modelBoxScaleSizes are the scale-modelbox row's ModelBox counts (issue
// 26: 300 and 2,000), times BENCH_SCALE.
var modelBoxScaleSizes = []int{300, 2000}

// scaleModelBoxRow runs the ModelBox row at each of modelBoxScaleSizes,
// each preceded by its floor: what the apiserver spends on the writes a
// ModelBox cannot do without, with no controller running.
func (b *bench) scaleModelBoxRow() {
	b.mgr = b.startManager()
	deploy, svc := b.modelBoxChildren()
	b.stopSharedManager()
	for _, size := range modelBoxScaleSizes {
		n := b.s.n(size)
		b.modelBoxFloor(n, deploy, svc)
		b.mgr = b.startManager()
		b.modelBoxAt(n, n, deploy, svc)
		b.stopSharedManager()
	}
}

// modelBoxFloor measures, with no manager running, n ModelBoxes created
// and, for each, its Deployment and Service server-side applied with the
// owner reference and labels the controller gives them: the apiserver's
// part of a ModelBox (its create with the CEL rules, an apply instead of a
// create per child) without the controller's reads, status writes, Event
// and latency. Against the direct side's time it bounds how close to 1.0×
// a controller can get; the ModelBox side's time against it is what the
// controller adds.
func (b *bench) modelBoxFloor(n int, deploy *appsv1.Deployment, svc *corev1.Service) {
	samples := make([]float64, 0, b.s.repeat)
	for range b.s.repeat {
		ns := b.namespace("bench-modelbox-floor", nil)
		done := b.watchUntil(ns, &appsv1.DeploymentList{}, n, func(o client.Object) bool {
			for _, c := range o.(*appsv1.Deployment).Status.Conditions {
				if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
					return true
				}
			}
			return false
		})
		start := time.Now()
		b.must(parallel(n, 32, func(i int) error { return b.applyModelBoxByHand(ns, fmt.Sprintf("box-%d", i), deploy, svc) }))
		b.must(<-done)
		samples = append(samples, time.Since(start).Seconds())
		b.dropNamespace(ns)
	}
	row := fmt.Sprintf("ModelBox vs Deployment + Service applied directly, %d", n)
	b.rep.add(&figure{Row: row, Metric: "floor: ModelBox created, children applied by hand, no controller, all Available", Unit: "s", N: n}, samples, nil)
}

// applyModelBoxByHand makes what a ModelBox and its controller write that
// a user cannot do without: the ModelBox, and its two children applied
// server-side, controlled by it, as the controller applies them.
func (b *bench) applyModelBoxByHand(ns, name string, deploy *appsv1.Deployment, svc *corev1.Service) error {
	box := benchModelBox(ns, name)
	if err := b.c.Client.Create(b.ctx, box); err != nil {
		return err
	}
	owner := []metav1.OwnerReference{{APIVersion: modelv1.GroupVersion.String(), Kind: "ModelBox", Name: name, UID: box.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	rename := func(m map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			if v == "template" {
				v = name
			}
			out[k] = v
		}
		return out
	}
	d := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: rename(deploy.Labels), OwnerReferences: owner},
		Spec:       *deploy.Spec.DeepCopy()}
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: rename(deploy.Spec.Selector.MatchLabels)}
	d.Spec.Template.Labels = rename(deploy.Spec.Template.Labels)
	s := &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: rename(svc.Labels), OwnerReferences: owner},
		Spec:       corev1.ServiceSpec{Type: svc.Spec.Type, Ports: svc.Spec.Ports, Selector: rename(svc.Spec.Selector)}}
	apply := metav1.PatchOptions{FieldManager: "bench", Force: ptr.To(true)}
	body, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if _, err := b.c.Clientset.AppsV1().Deployments(ns).Patch(b.ctx, name, types.ApplyPatchType, body, apply); err != nil {
		return err
	}
	if body, err = json.Marshal(s); err != nil {
		return err
	}
	_, err = b.c.Clientset.CoreV1().Services(ns).Patch(b.ctx, name, types.ApplyPatchType, body, apply)
	return err
}
