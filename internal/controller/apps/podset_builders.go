package apps

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	appsv1alpha1 "github.com/deckhand-dev/deckhand/api/apps/v1alpha1"
)

// defaultTemplate is the seed's pod: busybox sleeping for an hour. The
// container restarts when the sleep ends, so the pod keeps running.
func defaultTemplate() corev1.PodTemplateSpec {
	const busybox = "busybox"
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": busybox}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:    busybox,
				Image:   busybox,
				Command: []string{"sleep", "3600"},
			}},
		},
	}
}

// templateOf is the template a PodSet's pods are made from.
func templateOf(set *appsv1alpha1.PodSet) corev1.PodTemplateSpec {
	if set.Spec.Template == nil {
		return defaultTemplate()
	}
	return *set.Spec.Template.DeepCopy()
}

// templateHash names a template: pods whose hash label differs from the
// PodSet's are outdated. It hashes the template as written, so defaulting by
// the apiserver on the pods does not make them look outdated.
func templateHash(t corev1.PodTemplateSpec) string {
	b, err := json.Marshal(t)
	if err != nil {
		// A PodTemplateSpec always marshals; this is unreachable.
		panic(fmt.Sprintf("marshalling a pod template: %v", err))
	}
	h := fnv.New32a()
	_, _ = h.Write(b)
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// selectorOf is the label selector of a PodSet's pods, in string form.
func selectorOf(set *appsv1alpha1.PodSet) string {
	return appsv1alpha1.PodSetLabel + "=" + set.Name
}

// podFor builds a new pod for the set from its template, named by the
// apiserver after the set and controlled by it.
func podFor(set *appsv1alpha1.PodSet, tmpl corev1.PodTemplateSpec, hash string) *corev1.Pod {
	labels := maps.Clone(tmpl.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[appsv1alpha1.PodSetLabel] = set.Name
	labels[appsv1alpha1.PodTemplateHashLabel] = hash
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:    set.Namespace,
			GenerateName: set.Name + "-",
			Labels:       labels,
			Annotations:  maps.Clone(tmpl.Annotations),
			Finalizers:   tmpl.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(set,
				appsv1alpha1.GroupVersion.WithKind("PodSet"))},
		},
		Spec: *tmpl.Spec.DeepCopy(),
	}
}

// isActive reports whether a pod counts towards the set's size: it is
// neither finished nor being deleted.
func isActive(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && !isFinished(p)
}

// isFinished reports whether a pod has ended for good.
func isFinished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// isReady reports whether a pod's Ready condition is True.
func isReady(p *corev1.Pod) bool {
	return readyCondition(p) != nil
}

// readyCondition returns the pod's Ready condition when it is True.
func readyCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		c := &p.Status.Conditions[i]
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// isUpdated reports whether a pod was made from the template with this hash.
func isUpdated(p *corev1.Pod, hash string) bool {
	return p.Labels[appsv1alpha1.PodTemplateHashLabel] == hash
}
