package incident

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
)

// Each class of the guide's table, from what a kubelet reports of it.
func TestClassify(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	term := func(exit int32, reason string) *corev1.ContainerStateTerminated {
		return &corev1.ContainerStateTerminated{ExitCode: exit, Reason: reason,
			StartedAt: metav1.NewTime(t0), FinishedAt: metav1.NewTime(t0.Add(10 * time.Second))}
	}
	killing := func(container, probe string, at time.Time) corev1.Event {
		return corev1.Event{Reason: "Killing", Message: "Container " + container + " failed " + probe + " probe, will be restarted",
			LastTimestamp: metav1.NewTime(at)}
	}
	evicted := func(msg string, conds ...corev1.PodCondition) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: msg, Conditions: conds}}
	}
	for name, c := range map[string]struct {
		pod    *corev1.Pod
		f      failure
		events []corev1.Event
		want   debugv1beta1.IncidentClass
		says   string
	}{
		"exit 1":                 {f: failure{reason: debugv1beta1.IncidentError, instance: term(1, "Error")}, want: debugv1beta1.ClassExitCode, says: "exited with 1"},
		"exit 139 from a shell":  {f: failure{reason: debugv1beta1.IncidentError, instance: term(139, "Error")}, want: debugv1beta1.ClassSignal, says: "SIGSEGV (segmentation fault)"},
		"the runtime's signal":   {f: failure{reason: debugv1beta1.IncidentError, instance: &corev1.ContainerStateTerminated{Signal: 6, ExitCode: 134}}, want: debugv1beta1.ClassSignal, says: "SIGABRT"},
		"a SIGKILL from outside": {f: failure{reason: debugv1beta1.IncidentError, instance: term(137, "Error")}, want: debugv1beta1.ClassSignal, says: "SIGKILL"},
		"OOM, the main process":  {f: failure{reason: debugv1beta1.IncidentOOMKilled, instance: term(137, "OOMKilled")}, want: debugv1beta1.ClassOOMKilled, says: "main process"},
		"OOM, a child":           {f: failure{reason: debugv1beta1.IncidentOOMKilled, instance: term(3, "OOMKilled")}, want: debugv1beta1.ClassOOMKilledChild, says: "then exited with 3"},
		"OOM, a child, exit 0":   {f: failure{reason: debugv1beta1.IncidentOOMKilled, instance: term(0, "OOMKilled")}, want: debugv1beta1.ClassOOMKilledChild},
		"cannot start":           {f: failure{reason: debugv1beta1.IncidentError, instance: term(128, "StartError")}, want: debugv1beta1.ClassStartError},
		"liveness probe": {f: failure{reason: debugv1beta1.IncidentError, container: "app", instance: term(137, "Error")},
			events: []corev1.Event{killing("app", "liveness", t0.Add(9*time.Second))}, want: debugv1beta1.ClassProbeFailed, says: "liveness probe failed"},
		"startup probe": {f: failure{reason: debugv1beta1.IncidentError, container: "app", instance: term(143, "Error")},
			events: []corev1.Event{killing("app", "startup", t0.Add(5*time.Second))}, want: debugv1beta1.ClassProbeFailed, says: "startup probe"},
		"another container's probe": {f: failure{reason: debugv1beta1.IncidentError, container: "app", instance: term(137, "Error")},
			events: []corev1.Event{killing("sidecar", "liveness", t0.Add(9*time.Second))}, want: debugv1beta1.ClassSignal},
		"an earlier instance's probe": {f: failure{reason: debugv1beta1.IncidentError, container: "app", instance: term(137, "Error")},
			events: []corev1.Event{killing("app", "liveness", t0.Add(-time.Minute))}, want: debugv1beta1.ClassSignal},
		"eviction API": {pod: evicted("", corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI"}),
			f: failure{reason: debugv1beta1.IncidentEvicted}, want: debugv1beta1.ClassEvictionAPI},
		"node pressure": {pod: evicted("The node was low on resource: memory. Threshold quantity: 100Mi, available: 90Mi."),
			f: failure{reason: debugv1beta1.IncidentEvicted}, want: debugv1beta1.ClassNodePressure, says: "low on resource: memory"},
		"its own storage limit": {pod: evicted("Pod ephemeral local storage usage exceeds the total limit of containers 10Mi."),
			f: failure{reason: debugv1beta1.IncidentEvicted}, want: debugv1beta1.ClassLimitExceeded},
		"not ready": {f: failure{reason: debugv1beta1.IncidentNotReady}, want: debugv1beta1.ClassNotReady},
	} {
		pod := c.pod
		if pod == nil {
			pod = &corev1.Pod{}
		}
		got, says := classify(pod, c.f, c.events)
		if got != c.want || !strings.Contains(says, c.says) {
			t.Errorf("%s: %s %q, want %s saying %q", name, got, says, c.want, c.says)
		}
	}
}
