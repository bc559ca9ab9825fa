package podset

import (
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiservernames "k8s.io/apiserver/pkg/storage/names"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
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
func templateOf(set *appsv1beta1.PodSet) corev1.PodTemplateSpec {
	if set.Spec.Template == nil {
		return defaultTemplate()
	}
	return *set.Spec.Template.DeepCopy()
}

// selectorOf is the label selector of a PodSet's pods, in string form.
func selectorOf(set *appsv1beta1.PodSet) string {
	return appsv1beta1.PodSetLabel + "=" + set.Name
}

// podFor builds a new pod for the set from its template, under the given
// name (newPodName), controlled by the set.
func podFor(set *appsv1beta1.PodSet, tmpl corev1.PodTemplateSpec, hash, name string) *corev1.Pod {
	labels := maps.Clone(tmpl.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[appsv1beta1.PodSetLabel] = set.Name
	labels[appsv1beta1.PodTemplateHashLabel] = hash
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   set.Namespace,
			Name:        name,
			Labels:      labels,
			Annotations: maps.Clone(tmpl.Annotations),
			Finalizers:  tmpl.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(set,
				appsv1beta1.GroupVersion.WithKind("PodSet"))},
		},
		Spec: *tmpl.Spec.DeepCopy(),
	}
}

// newPodName names a new pod of the set: the set's name and a random
// suffix, as generateName would. Named here rather than by the apiserver, so
// that the controller knows a pod's name before it exists: its expectations
// are kept by name, and a creation whose answer was lost can be looked up.
func newPodName(set *appsv1beta1.PodSet) string {
	return apiservernames.SimpleNameGenerator.GenerateName(set.Name + "-")
}

// newPodNames names n new pods of the set with name.
func newPodNames(set *appsv1beta1.PodSet, n int, name func(*appsv1beta1.PodSet) string) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = name(set)
	}
	return names
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

// isAvailable reports whether a pod has been ready for at least
// minReadySeconds at now.
func isAvailable(p *corev1.Pod, minReadySeconds int32, now time.Time) bool {
	c := readyCondition(p)
	return c != nil && availableAt(c, minReadySeconds).Compare(now) <= 0
}

// availableAt is when a pod ready since c's transition becomes available.
func availableAt(c *corev1.PodCondition, minReadySeconds int32) time.Time {
	return c.LastTransitionTime.Add(time.Duration(minReadySeconds) * time.Second)
}

// untilAvailable is how long until the next ready but not yet available
// active pod becomes available; 0 when none is waiting.
func untilAvailable(pods []*corev1.Pod, minReadySeconds int32, now time.Time) time.Duration {
	var next time.Duration
	for _, p := range pods {
		c := readyCondition(p)
		if c == nil || !isActive(p) {
			continue
		}
		if d := availableAt(c, minReadySeconds).Sub(now); d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	return next
}

// isUpdated reports whether a pod was made from the template with this hash.
func isUpdated(p *corev1.Pod, hash string) bool {
	return p.Labels[appsv1beta1.PodTemplateHashLabel] == hash
}

// PodFor is the pod the PodSet creates next (its name still to be
// generated): what its admission webhook validates.
func PodFor(set *appsv1beta1.PodSet) *corev1.Pod {
	tmpl := templateOf(set)
	return podFor(set, tmpl, templateHash(tmpl), newPodName(set))
}
