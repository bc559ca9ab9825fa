package incident_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/podbuggertest"
)

// The recorder runs as part of the PodBugger controller, so its envtest
// tests start the manager with it; what they share with that controller's
// tests is in podbuggertest.

var ctx = context.Background()

// runningPod creates a pod with one container, "app", and sets its phase
// to Running, as a kubelet would (envtest has none).
func runningPod(t *testing.T, ns, name string, labels map[string]string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatalf("creating pod %s: %v", name, err)
	}
	podbuggertest.SetRunning(t, env, p)
	return p
}
