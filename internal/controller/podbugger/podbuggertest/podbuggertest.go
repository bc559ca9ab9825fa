// Package podbuggertest is what the envtest tests of the PodBugger
// controller (internal/controller/podbugger) and of its incident recorder
// (podbugger/incident) share: the recorder runs as part of that controller,
// so both start the manager with it, make PodBuggers of the same web pods
// and read what the controller wrote. Tests only import it.
package podbuggertest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	podbuggercontroller "github.com/deckhand-dev/deckhand/internal/controller/podbugger"
	"github.com/deckhand-dev/deckhand/internal/manager"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// Image is the debug image the tests' PodBuggers inject.
const Image = "docker.io/library/busybox:1.37"

// Web selects the pods the tests debug.
var Web = map[string]string{"app": "web"}

var ctx = context.Background()

// Options runs only the PodBugger controller (its incident recorder with
// it), allowing busybox images.
func Options(env *testenv.Env) manager.Options {
	o := env.ManagerOptions()
	o.Controllers = []string{podbuggercontroller.ControllerName}
	o.PodBuggerAllowedImages = []string{"docker.io/library/busybox:*"}
	return o
}

// EnabledNamespace is a new namespace opted in to debugging.
func EnabledNamespace(t *testing.T, env *testenv.Env) string {
	return env.NamespaceWithLabels(t, map[string]string{debugv1beta1.NamespaceEnabledLabel: "true"})
}

// SetRunning sets the pod's phase to Running, as a kubelet would (envtest
// has none).
func SetRunning(t *testing.T, env *testenv.Env, p *corev1.Pod) {
	t.Helper()
	p.Status.Phase = corev1.PodRunning
	if err := env.Client.Status().Update(ctx, p); err != nil {
		t.Fatalf("setting pod %s running: %v", p.Name, err)
	}
}

// PodBugger is a PodBugger of the pods selector selects, injecting Image.
func PodBugger(ns, name string, selector map[string]string) *debugv1beta1.PodBugger {
	return &debugv1beta1.PodBugger{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: debugv1beta1.PodBuggerSpec{
			Selector: metav1.LabelSelector{MatchLabels: selector},
			Image:    Image,
		},
	}
}

// Ephemeral returns the names of a pod's ephemeral containers as the
// apiserver holds them.
func Ephemeral(env *testenv.Env, ns, name string) func() ([]string, error) {
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

// Status returns a PodBugger's status as the apiserver holds it.
func Status(env *testenv.Env, pb *debugv1beta1.PodBugger) func() (debugv1beta1.PodBuggerStatus, error) {
	return func() (debugv1beta1.PodBuggerStatus, error) {
		got := &debugv1beta1.PodBugger{}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(pb), got)
		return got.Status, err
	}
}

// Condition matches a status with the condition typ at st for reason.
func Condition(typ string, st metav1.ConditionStatus, reason string) types.GomegaMatcher {
	return gomega.HaveField("Conditions", testenv.HaveCondition(typ, st, reason))
}

// Recorder creates a PodBugger of Web pods that records the failures
// triggers names, changed by change.
func Recorder(t *testing.T, env *testenv.Env, ns string, triggers []debugv1beta1.Trigger, change func(*debugv1beta1.PodBugger)) *debugv1beta1.PodBugger {
	t.Helper()
	pb := PodBugger(ns, "web-incidents", Web)
	pb.Spec.Triggers = triggers
	if change != nil {
		change(pb)
	}
	env.Create(t, pb)
	return pb
}

// Crash sets the pod's container "app" as a kubelet does when its n-th
// instance exited with code exit (reason Error) at finished and the kubelet
// restarted it (n > 1: running again, the crash in lastState; crashLoop:
// waiting in CrashLoopBackOff instead).
func Crash(t *testing.T, env *testenv.Env, p *corev1.Pod, n int, exit int32, finished time.Time, crashLoop bool) {
	t.Helper()
	if err := CrashPod(env, p, n, exit, finished, crashLoop); err != nil {
		t.Fatal(err)
	}
}

// CrashPod is Crash for any goroutine: it returns what went wrong.
func CrashPod(env *testenv.Env, p *corev1.Pod, n int, exit int32, finished time.Time, crashLoop bool) error {
	fresh := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), fresh); err != nil {
		return err
	}
	term := &corev1.ContainerStateTerminated{ExitCode: exit, Reason: "Error", ContainerID: fmt.Sprintf("containerd://instance-%d", n),
		StartedAt: metav1.NewTime(finished.Add(-time.Second)), FinishedAt: metav1.NewTime(finished), Message: strings.Repeat("m", 3000)}
	cs := corev1.ContainerStatus{Name: "app", Image: "pause", ImageID: "pause", RestartCount: int32(n - 1)}
	switch {
	case crashLoop:
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
		cs.LastTerminationState.Terminated = term
	default:
		cs.State.Terminated = term
	}
	fresh.Status.Phase = corev1.PodRunning
	fresh.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
	if err := env.Client.Status().Update(ctx, fresh); err != nil {
		return fmt.Errorf("setting pod %s crashed: %w", p.Name, err)
	}
	return nil
}

// IncidentsIn returns the PodIncidents of a namespace.
func IncidentsIn(env *testenv.Env, ns string) func() ([]debugv1beta1.PodIncident, error) {
	return func() ([]debugv1beta1.PodIncident, error) {
		list := &debugv1beta1.PodIncidentList{}
		err := env.Client.List(ctx, list, client.InNamespace(ns))
		return list.Items, err
	}
}
