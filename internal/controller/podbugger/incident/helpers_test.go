package incident_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	podbuggercontroller "github.com/deckhand-dev/deckhand/internal/controller/podbugger"
	"github.com/deckhand-dev/deckhand/internal/manager"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// What the recorder's envtest tests share with the PodBugger controller's
// (podbugger_controller_test.go there): the recorder runs as part of that
// controller, so its tests start the manager with it.

const image = "docker.io/library/busybox:1.37"

var (
	ctx = context.Background()
	// web selects the pods the tests debug.
	web = map[string]string{"app": "web"}
)

// options runs only the PodBugger controller (its incident recorder with
// it), allowing busybox images.
func options() manager.Options {
	o := env.ManagerOptions()
	o.Controllers = []string{podbuggercontroller.ControllerName}
	o.PodBuggerAllowedImages = []string{"docker.io/library/busybox:*"}
	return o
}

func enabledNamespace(t *testing.T) string {
	return env.NamespaceWithLabels(t, map[string]string{debugv1beta1.NamespaceEnabledLabel: "true"})
}

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
	setRunning(t, p)
	return p
}

func setRunning(t *testing.T, p *corev1.Pod) {
	t.Helper()
	p.Status.Phase = corev1.PodRunning
	if err := env.Client.Status().Update(ctx, p); err != nil {
		t.Fatalf("setting pod %s running: %v", p.Name, err)
	}
}

func podBugger(ns, name string, selector map[string]string) *debugv1beta1.PodBugger {
	return &debugv1beta1.PodBugger{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: debugv1beta1.PodBuggerSpec{
			Selector: metav1.LabelSelector{MatchLabels: selector},
			Image:    image,
		},
	}
}

// ephemeral returns the names of a pod's ephemeral containers as the
// apiserver holds them.
func ephemeral(ns, name string) func() ([]string, error) {
	return func() ([]string, error) {
		p := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
			return nil, err
		}
		var names []string
		for _, c := range p.Spec.EphemeralContainers {
			names = append(names, c.Name)
		}
		return names, nil
	}
}

// status returns a PodBugger's status as the apiserver holds it.
func status(pb *debugv1beta1.PodBugger) func() (debugv1beta1.PodBuggerStatus, error) {
	return func() (debugv1beta1.PodBuggerStatus, error) {
		got := &debugv1beta1.PodBugger{}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(pb), got)
		return got.Status, err
	}
}

// condition matches a status with the condition typ at st for reason.
func condition(typ string, st metav1.ConditionStatus, reason string) types.GomegaMatcher {
	return HaveField("Conditions", testenv.HaveCondition(typ, st, reason))
}
