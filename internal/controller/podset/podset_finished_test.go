package podset

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestNextBackoff(t *testing.T) {
	tests := map[string]struct {
		e         backoffEntry
		at        time.Duration
		wantDelay time.Duration
	}{
		"first replacement waits a second for the next": {at: 0, wantDelay: time.Second},
		"doubles":               {e: backoffEntry{replaced: 1, until: t0.Add(time.Second)}, at: 2 * time.Second, wantDelay: 2 * time.Second},
		"doubles again":         {e: backoffEntry{replaced: 3, until: t0.Add(time.Second)}, at: 2 * time.Second, wantDelay: 8 * time.Second},
		"capped":                {e: backoffEntry{replaced: 20, until: t0}, at: time.Minute, wantDelay: finishedBackoffMax},
		"starts over":           {e: backoffEntry{replaced: 20, until: t0}, at: 11 * time.Minute, wantDelay: time.Second},
		"not quiet long enough": {e: backoffEntry{replaced: 2, until: t0}, at: 9 * time.Minute, wantDelay: 4 * time.Second},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			now := t0.Add(tc.at)
			got := nextBackoff(tc.e, now)
			if d := got.until.Sub(now); d != tc.wantDelay {
				t.Errorf("next delay = %s, want %s", d, tc.wantDelay)
			}
		})
	}
}

func TestFinishedMessage(t *testing.T) {
	p := testPod("web-a", failed)
	p.Status.Reason = "Evicted"
	p.Status.Message = "The node was low on memory."
	p.Status.ContainerStatuses = []corev1.ContainerStatus{
		{Name: "app", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}},
		{Name: "side", LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "boom"}}},
		{Name: "running"},
	}
	want := "Pod web-a Failed (Evicted): The node was low on memory.; container app exited with code 137 (OOMKilled); container side exited with code 1 (Error): boom"
	if got := finishedMessage(p); got != want {
		t.Errorf("finishedMessage =\n%q, want\n%q", got, want)
	}
}
