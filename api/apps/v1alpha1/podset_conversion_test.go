package v1alpha1_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/randfill"

	appsv1alpha1 "github.com/deckhand-dev/deckhand/api/apps/v1alpha1"
	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/testenv/convtest"
)

func TestPodSetConversionRoundTrips(t *testing.T) {
	convtest.RoundTrip(t,
		func() *appsv1alpha1.PodSet { return &appsv1alpha1.PodSet{} },
		func() *appsv1beta1.PodSet { return &appsv1beta1.PodSet{} },
		smallTemplate)
}

// smallTemplate fills a pod template with labels and containers only: the
// conversion copies the template whole, and a fully random PodSpec costs
// much and proves nothing more.
func smallTemplate(tmpl *corev1.PodTemplateSpec, c randfill.Continue) {
	c.Fill(&tmpl.Labels)
	c.Fill(&tmpl.Spec.Containers)
	for i := range tmpl.Spec.Containers {
		tmpl.Spec.Containers[i] = corev1.Container{Name: tmpl.Spec.Containers[i].Name, Image: tmpl.Spec.Containers[i].Image}
	}
	c.Fill(&tmpl.Spec.RestartPolicy)
}
