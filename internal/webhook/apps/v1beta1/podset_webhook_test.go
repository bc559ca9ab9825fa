package v1beta1

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
)

func TestValidateTemplate(t *testing.T) {
	tests := map[string]struct {
		mutate func(*corev1.PodSpec)
		want   []string
	}{
		"valid":                 {mutate: func(*corev1.PodSpec) {}},
		"Always is valid":       {mutate: func(s *corev1.PodSpec) { s.RestartPolicy = corev1.RestartPolicyAlways }},
		"Never":                 {mutate: func(s *corev1.PodSpec) { s.RestartPolicy = corev1.RestartPolicyNever }, want: []string{`spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"`}},
		"OnFailure":             {mutate: func(s *corev1.PodSpec) { s.RestartPolicy = corev1.RestartPolicyOnFailure }, want: []string{`spec.template.spec.restartPolicy: Unsupported value: "OnFailure"`}},
		"activeDeadlineSeconds": {mutate: func(s *corev1.PodSpec) { s.ActiveDeadlineSeconds = new(int64(60)) }, want: []string{"spec.template.spec.activeDeadlineSeconds: Forbidden"}},
		"both, each named":      {mutate: func(s *corev1.PodSpec) { s.RestartPolicy = "Never"; s.ActiveDeadlineSeconds = new(int64(1)) }, want: []string{"restartPolicy", "activeDeadlineSeconds"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tmpl := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
			tc.mutate(&tmpl.Spec)
			errs := ValidateTemplate(&appsv1beta1.PodSet{Spec: appsv1beta1.PodSetSpec{Template: tmpl}})
			if len(errs) != len(tc.want) {
				t.Fatalf("got %d errors, want %d: %v", len(errs), len(tc.want), errs)
			}
			for i, want := range tc.want {
				if !strings.Contains(errs[i].Error(), want) {
					t.Errorf("error %d = %q, want it to contain %q", i, errs[i].Error(), want)
				}
			}
		})
	}
	if errs := ValidateTemplate(&appsv1beta1.PodSet{}); len(errs) != 0 {
		t.Errorf("the default template is refused: %v", errs)
	}
}

func TestTemplateErrors(t *testing.T) {
	// Causes as the apiserver returns them for a refused pod.
	details := &metav1.StatusDetails{Causes: []metav1.StatusCause{
		{Type: metav1.CauseTypeFieldValueRequired, Message: "Required value", Field: "spec.containers[0].image"},
		{Type: metav1.CauseTypeFieldValueInvalid, Message: `Invalid value: "Bad_Name": a lowercase RFC 1123 label must consist of ...`, Field: "spec.containers[0].name"},
		{Type: metav1.CauseTypeFieldValueInvalid, Message: `Invalid value: "-x": name part must consist of ...`, Field: "metadata.labels"},
		{Type: metav1.CauseTypeFieldValueNotSupported, Message: `Unsupported value: "Sometimes": supported values: "Always"`, Field: "spec.restartPolicy"},
	}}
	want := []string{
		"spec.template.spec.containers[0].image: Required value",
		`spec.template.spec.containers[0].name: Invalid value: "Bad_Name": a lowercase RFC 1123 label must consist of ...`,
		`spec.template.metadata.labels: Invalid value: "-x": name part must consist of ...`,
		`spec.template.spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always"`,
	}
	errs := TemplateErrors(details)
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d: %v", len(errs), len(want), errs)
	}
	for i := range want {
		if got := errs[i].Error(); got != want[i] {
			t.Errorf("error %d =\n%q, want\n%q", i, got, want[i])
		}
	}
	if errs := TemplateErrors(nil); errs != nil {
		t.Errorf("no details gave %v", errs)
	}
}
