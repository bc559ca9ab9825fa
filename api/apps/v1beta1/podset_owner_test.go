package v1beta1

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A pod is the PodSet's whatever version its owner reference names: pods
// made before the upgrade to v1beta1 say v1alpha1.
func TestControllerRef(t *testing.T) {
	tests := map[string]struct {
		apiVersion, kind string
		want             bool
	}{
		"v1beta1":                     {"apps.deckhand.dev/v1beta1", "PodSet", true},
		"v1alpha1, before an upgrade": {"apps.deckhand.dev/v1alpha1", "PodSet", true},
		"another group":               {"apps/v1", "PodSet", false},
		"another kind":                {"apps.deckhand.dev/v1beta1", "PodBugger", false},
		"not a group/version":         {"a/b/c", "PodSet", false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{
				APIVersion: tt.apiVersion, Kind: tt.kind, Name: "web", UID: "u", Controller: ptr.To(true),
			}}}}
			if got := ControllerRef(pod) != nil; got != tt.want {
				t.Errorf("ControllerRef = %v, want %v", got, tt.want)
			}
		})
	}
}
