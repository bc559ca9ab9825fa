package podset

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
)

// goldenTemplate is a fixed template whose hash must never change: if this
// test fails, upgrading Deckhand would roll every PodSet in every cluster.
func goldenTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", "tier": "front"}, Annotations: map[string]string{"a": "b"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "web", Image: "nginx:1.27", Args: []string{"-g", "daemon off;"},
				Ports:     []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}},
				Env:       []corev1.EnvVar{{Name: "A", Value: "1"}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
			}},
			AutomountServiceAccountToken: new(false),
			NodeSelector:                 map[string]string{"disk": "ssd"},
		},
	}
}

func TestTemplateHashGolden(t *testing.T) {
	const (
		golden = "368fe91fc0589b40"
		seed   = "14cffb87e67c509c"
	)
	if got := templateHash(goldenTemplate()); got != golden {
		t.Errorf("hash of the golden template = %q, want %q: a changed hash rolls every PodSet on upgrade", got, golden)
	}
	if got := templateHash(defaultTemplate()); got != seed {
		t.Errorf("hash of the default template = %q, want %q", got, seed)
	}
}

func TestTemplateHashIgnoresHowEmptyValuesAreWritten(t *testing.T) {
	base := templateHash(goldenTemplate())
	same := map[string]func(*corev1.PodTemplateSpec){
		"empty slices instead of nil": func(t *corev1.PodTemplateSpec) {
			t.Spec.Volumes = []corev1.Volume{}
			t.Spec.Containers[0].Command = []string{}
		},
		"empty map instead of nil":     func(t *corev1.PodTemplateSpec) { t.Spec.Overhead = corev1.ResourceList{} },
		"empty struct pointer":         func(t *corev1.PodTemplateSpec) { t.Spec.SecurityContext = &corev1.PodSecurityContext{} },
		"empty string for unset field": func(t *corev1.PodTemplateSpec) { t.Spec.Hostname = "" },
	}
	for name, mutate := range same {
		t.Run(name, func(t *testing.T) {
			tmpl := goldenTemplate()
			mutate(&tmpl)
			if got := templateHash(tmpl); got != base {
				t.Errorf("hash = %q, want %q", got, base)
			}
		})
	}
	differ := map[string]func(*corev1.PodTemplateSpec){
		"image":                  func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Image = "nginx:1.28" },
		"label":                  func(t *corev1.PodTemplateSpec) { t.Labels["tier"] = "back" },
		"automount true":         func(t *corev1.PodTemplateSpec) { t.Spec.AutomountServiceAccountToken = new(true) },
		"automount unset":        func(t *corev1.PodTemplateSpec) { t.Spec.AutomountServiceAccountToken = nil },
		"argument order":         func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Args = []string{"daemon off;", "-g"} },
		"an empty arg keeps its": func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Args = []string{"", "-g", "daemon off;"} },
	}
	for name, mutate := range differ {
		t.Run(name, func(t *testing.T) {
			tmpl := goldenTemplate()
			mutate(&tmpl)
			if got := templateHash(tmpl); got == base {
				t.Errorf("hash did not change")
			}
		})
	}
}

func TestRelabelLegacyHash(t *testing.T) {
	tmpl := goldenTemplate()
	hash := templateHash(tmpl)
	legacy := testPod("legacy")
	legacy.Labels[appsv1beta1.PodTemplateHashLabel] = legacyTemplateHash(tmpl)
	other := testPod("other")
	other.Labels[appsv1beta1.PodTemplateHashLabel] = legacyTemplateHash(defaultTemplate())
	relabelLegacyHash([]*corev1.Pod{legacy, other}, tmpl, hash)
	if !isUpdated(legacy, hash) {
		t.Errorf("a pod with the legacy hash of the current template is outdated")
	}
	if isUpdated(other, hash) {
		t.Errorf("a pod with the legacy hash of another template is up to date")
	}
}
