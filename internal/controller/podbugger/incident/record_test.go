package incident

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
)

func TestFailuresOf(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	term := func(exit, signal int32, reason, id string) *corev1.ContainerStateTerminated {
		return &corev1.ContainerStateTerminated{ExitCode: exit, Signal: signal, Reason: reason, ContainerID: id,
			FinishedAt: metav1.NewTime(now.Add(-time.Second))}
	}
	all := []debugv1beta1.Trigger{"Error", "OOMKilled", "CrashLoopBackOff", "NotReady", "Evicted"}
	status := func(cs corev1.ContainerStatus) corev1.PodStatus {
		cs.Name = "app"
		return corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{cs}}
	}
	tests := map[string]struct {
		status       corev1.PodStatus
		triggers     []debugv1beta1.Trigger
		want         []debugv1beta1.IncidentReason
		wantPrevious bool
		wantRecheck  time.Duration
	}{
		"running":                     {status: status(corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}), triggers: all},
		"exited 0":                    {status: status(corev1.ContainerStatus{State: corev1.ContainerState{Terminated: term(0, 0, "Completed", "a")}}), triggers: all},
		"exited 1, current":           {status: status(corev1.ContainerStatus{State: corev1.ContainerState{Terminated: term(1, 0, "Error", "a")}}), triggers: all, want: []debugv1beta1.IncidentReason{"Error"}},
		"killed by a signal":          {status: status(corev1.ContainerStatus{State: corev1.ContainerState{Terminated: term(0, 9, "Error", "a")}}), triggers: all, want: []debugv1beta1.IncidentReason{"Error"}},
		"OOM killed":                  {status: status(corev1.ContainerStatus{State: corev1.ContainerState{Terminated: term(137, 0, "OOMKilled", "a")}}), triggers: all, want: []debugv1beta1.IncidentReason{"OOMKilled"}},
		"OOM kill of a child, exit 0": {status: status(corev1.ContainerStatus{State: corev1.ContainerState{Terminated: term(0, 0, "OOMKilled", "a")}}), triggers: all, want: []debugv1beta1.IncidentReason{"OOMKilled"}},
		"OOM without trigger":         {status: status(corev1.ContainerStatus{State: corev1.ContainerState{Terminated: term(137, 0, "OOMKilled", "a")}}), triggers: []debugv1beta1.Trigger{"Error"}},
		"Error is not default":        {status: status(corev1.ContainerStatus{State: corev1.ContainerState{Terminated: term(1, 0, "Error", "a")}}), triggers: []debugv1beta1.Trigger{"Running"}},
		"crash loop, previous": {status: status(corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: term(1, 0, "Error", "a")}}), triggers: all, want: []debugv1beta1.IncidentReason{"CrashLoopBackOff"}, wantPrevious: true},
		"restarted, running again": {status: status(corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			LastTerminationState: corev1.ContainerState{Terminated: term(2, 0, "Error", "a")}}), triggers: all, want: []debugv1beta1.IncidentReason{"Error"}, wantPrevious: true},
		"an init container exited 1": {status: corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{
			{Name: "init", State: corev1.ContainerState{Terminated: term(1, 0, "Error", "a")}}}}, triggers: all, want: []debugv1beta1.IncidentReason{"Error"}},
		"an init container completed": {status: corev1.PodStatus{Phase: corev1.PodRunning, InitContainerStatuses: []corev1.ContainerStatus{
			{Name: "init", State: corev1.ContainerState{Terminated: term(0, 0, "Completed", "a")}}}}, triggers: all},
		"an init container in a crash loop, OOM-killed": {status: corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{
			{Name: "init", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: term(137, 0, "OOMKilled", "a")}}}},
			triggers: all, want: []debugv1beta1.IncidentReason{"OOMKilled"}, wantPrevious: true},
		"evicted by the kubelet": {status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted"}, triggers: all, want: []debugv1beta1.IncidentReason{"Evicted"}},
		"evicted through the API": {status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.DisruptionTarget,
			Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI"}}}, triggers: all, want: []debugv1beta1.IncidentReason{"Evicted"}},
		"preempted is no eviction": {status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.DisruptionTarget,
			Status: corev1.ConditionTrue, Reason: "PreemptionByScheduler"}}}, triggers: all},
		"not ready long enough": {status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady,
			Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))}}}, triggers: all, want: []debugv1beta1.IncidentReason{"NotReady"}},
		"not ready a moment": {status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady,
			Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(now.Add(-20 * time.Second))}}}, triggers: all, wantRecheck: 10 * time.Second},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			fs, recheck := failuresOf(&corev1.Pod{Status: tt.status}, tt.triggers, 30*time.Second, now)
			var got []debugv1beta1.IncidentReason
			for _, f := range fs {
				got = append(got, f.reason)
				if f.instance != nil && f.previous != tt.wantPrevious {
					t.Errorf("previous = %v, want %v", f.previous, tt.wantPrevious)
				}
			}
			if strings.Join(toStrings(got), ",") != strings.Join(toStrings(tt.want), ",") {
				t.Errorf("failures %v, want %v", got, tt.want)
			}
			if recheck != tt.wantRecheck {
				t.Errorf("recheck %v, want %v", recheck, tt.wantRecheck)
			}
		})
	}
}

// TestAnEvictionWithoutItsConditionIsCountedOnce: a pod evicted by a
// kubelet that sets no DisruptionTarget condition is dated by its status,
// so the pass after the one that recorded it (a rollout, a failover, a
// resync) finds it counted, instead of a new eviction each time.
func TestAnEvictionWithoutItsConditionIsCountedOnce(t *testing.T) {
	evicted := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	pods := map[string]*corev1.Pod{
		"dated by its containers and conditions": {Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(evicted.Add(-time.Second))}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 137, Reason: "Error", FinishedAt: metav1.NewTime(evicted)}}}}}},
		"with nothing but its creation": {ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(evicted)},
			Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted"}},
	}
	for name, pod := range pods {
		t.Run(name, func(t *testing.T) {
			first, _ := failuresOf(pod, []debugv1beta1.Trigger{debugv1beta1.TriggerEvicted}, time.Minute, evicted.Add(time.Minute))
			if len(first) != 1 || first[0].reason != debugv1beta1.IncidentEvicted {
				t.Fatalf("failures %v, want one eviction", first)
			}
			recs := []debugv1beta1.PodIncident{{Spec: debugv1beta1.PodIncidentSpec{Reason: debugv1beta1.IncidentEvicted, Count: 1,
				LastTime: metav1.NewTime(first[0].at)}}}
			for _, later := range []time.Duration{2 * time.Minute, time.Hour} {
				again, _ := failuresOf(pod, []debugv1beta1.Trigger{debugv1beta1.TriggerEvicted}, time.Minute, evicted.Add(later))
				if len(again) != 1 || !counted(again[0], recs) {
					t.Errorf("a pass %v after the eviction counts it again (at %v, recorded at %v)", later, again[0].at, first[0].at)
				}
			}
		})
	}
}

func toStrings(rs []debugv1beta1.IncidentReason) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}

// TestOneCrashIsCountedOnce: a crash is counted once whatever reason it is
// seen with; a later one counts in the record of its reason within the
// backoff window, else opens a new one.
func TestOneCrashIsCountedOnce(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	rec := debugv1beta1.PodIncident{Spec: debugv1beta1.PodIncidentSpec{Reason: "Error", Container: "app",
		LastTime: metav1.NewTime(t0)}}
	recs := []debugv1beta1.PodIncident{rec}
	same := failure{reason: "CrashLoopBackOff", container: "app", at: t0}
	if !counted(same, recs) {
		t.Error("the crash seen again in CrashLoopBackOff is counted again")
	}
	if counted(failure{reason: "Error", container: "other", at: t0}, recs) {
		t.Error("another container's crash is taken for counted")
	}
	next := failure{reason: "Error", container: "app", at: t0.Add(20 * time.Second)}
	if counted(next, recs) || recordFor(next, recs) == nil {
		t.Error("the next crash is not counted in the record of its reason")
	}
	late := failure{reason: "Error", container: "app", at: t0.Add(backoffWindow + time.Second)}
	if recordFor(late, recs) != nil {
		t.Error("a crash past the backoff window counts in the old record")
	}
	if recordFor(failure{reason: "CrashLoopBackOff", container: "app", at: t0.Add(time.Minute)}, recs) != nil {
		t.Error("a crash of another reason counts in the Error record")
	}
}

// TestTenantTextIsBounded: logs, messages and Events are the tenant's
// words; each is cut to its bound, as valid UTF-8.
func TestTenantTextIsBounded(t *testing.T) {
	long := strings.Repeat("é", 10000) + "end"
	got, truncated := tail(long, 4096)
	if len(got) > 4096 || !truncated || !strings.HasSuffix(got, "end") || !utf8.ValidString(got) {
		t.Errorf("tail: %d bytes, truncated %v, valid %v", len(got), truncated, utf8.ValidString(got))
	}
	if c := cut("\xff"+long, 1024); len(c) > 1024 || !utf8.ValidString(c) {
		t.Errorf("cut: %d bytes, valid %v", len(c), utf8.ValidString(c))
	}
	events := make([]corev1.Event, 0, 30)
	for i := range 30 {
		events = append(events, corev1.Event{Reason: "R", Message: long, Count: int32(i),
			LastTimestamp: metav1.NewTime(time.Unix(int64(1000+i), 0))})
	}
	out := incidentEvents(events, scrub{})
	if len(out) != debugv1beta1.MaxIncidentEvents || out[len(out)-1].Count != 29 {
		t.Fatalf("%d events, the last counting %d", len(out), out[len(out)-1].Count)
	}
	for _, e := range out {
		if len(e.Message) > debugv1beta1.MaxIncidentEventMessage {
			t.Errorf("an event message of %d bytes", len(e.Message))
		}
	}
}

// A container stopped because its pod is being deleted (a rollout, a
// scale-down, a preemption) is no failure: the SIGTERM's exit code (143) or
// the SIGKILL's 137 at the end of the grace period is recorded as nothing.
// One that failed before the deletion was asked for is still a failure.
func TestATerminationByDeletionIsNoFailure(t *testing.T) {
	requested := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	pod := func(finished time.Time, exit int32) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: ptr.To(metav1.NewTime(requested.Add(30 * time.Second))), DeletionGracePeriodSeconds: ptr.To[int64](30)},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "app",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Reason: "Error", FinishedAt: metav1.NewTime(finished)}}}}},
		}
	}
	all := []debugv1beta1.Trigger{debugv1beta1.TriggerError, debugv1beta1.TriggerOOMKilled, debugv1beta1.TriggerCrashLoopBackOff}
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want int
	}{
		"SIGTERM at the deletion":           {pod(requested.Add(time.Second), 143), 0},
		"SIGKILL at the grace period's end": {pod(requested.Add(30*time.Second), 137), 0},
		"failed before the deletion":        {pod(requested.Add(-time.Minute), 1), 1},
	} {
		if fs, _ := failuresOf(tc.pod, all, time.Minute, requested.Add(time.Minute)); len(fs) != tc.want {
			t.Errorf("%s: %d failures, want %d", name, len(fs), tc.want)
		}
	}
}
