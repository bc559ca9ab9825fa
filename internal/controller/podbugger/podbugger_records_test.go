package podbugger_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
)

// The records the pruning tests (podbugger_prune_test.go,
// podbugger_pace_test.go) need written: the same helpers as the incident
// recorder's tests (incident/recorder_test.go).

// recorder is a PodBugger of web pods that records the failures triggers
// names, changed by change.
func recorder(t *testing.T, ns string, triggers []debugv1beta1.Trigger, change func(*debugv1beta1.PodBugger)) *debugv1beta1.PodBugger {
	t.Helper()
	pb := podBugger(ns, "web-incidents", web)
	pb.Spec.Triggers = triggers
	if change != nil {
		change(pb)
	}
	env.Create(t, pb)
	return pb
}

// crash sets the pod's container "app" as a kubelet does when its n-th
// instance exited with code 1 (reason Error) at finished and the kubelet
// restarted it (n > 1: running again, the crash in lastState; crashLoop:
// waiting in CrashLoopBackOff instead).
func crash(t *testing.T, p *corev1.Pod, n int, finished time.Time, crashLoop bool) {
	t.Helper()
	fresh := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), fresh); err != nil {
		t.Fatal(err)
	}
	term := &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", ContainerID: fmt.Sprintf("containerd://instance-%d", n),
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
		t.Fatalf("setting pod %s crashed: %v", p.Name, err)
	}
}

// incidentsIn returns the PodIncidents of a namespace.
func incidentsIn(ns string) func() ([]debugv1beta1.PodIncident, error) {
	return func() ([]debugv1beta1.PodIncident, error) {
		list := &debugv1beta1.PodIncidentList{}
		err := env.Client.List(ctx, list, client.InNamespace(ns))
		return list.Items, err
	}
}
