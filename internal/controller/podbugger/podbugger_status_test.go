package podbugger

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/policy"
)

func TestComputeStatus(t *testing.T) {
	now := time.Unix(1000, 0)
	earlier := metav1.NewTime(time.Unix(500, 0))
	pb := func(spec debugv1beta1.PodBuggerSpec, pods ...debugv1beta1.DebuggedPod) *debugv1beta1.PodBugger {
		return &debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Generation: 3}, Spec: spec,
			Status: debugv1beta1.PodBuggerStatus{Pods: pods}}
	}
	violation := policy.Violation{Reason: debugv1beta1.ReasonImageNotAllowed,
		Err: field.Forbidden(field.NewPath("spec", "image"), "no")}

	tests := map[string]struct {
		pb        *debugv1beta1.PodBugger
		o         observation
		installed int32
		ready     metav1.ConditionStatus
		reason    string
		blocked   metav1.ConditionStatus
		times     map[string]metav1.Time
	}{
		"active; a known pod keeps its time, a new one gets the injection time": {
			pb: pb(debugv1beta1.PodBuggerSpec{MaxPods: 10}, debugv1beta1.DebuggedPod{Name: "a", UID: "ua", Time: earlier}),
			o: observation{now: now, carriers: map[types.UID]carrier{
				"ua": {name: "a"}, "ub": {name: "b", addedAt: time.Unix(900, 0)}, "uc": {name: "c"}}},
			installed: 3, ready: metav1.ConditionTrue, reason: debugv1beta1.ReasonActive, blocked: metav1.ConditionFalse,
			times: map[string]metav1.Time{"a": earlier, "b": metav1.NewTime(time.Unix(900, 0)), "c": metav1.NewTime(now)},
		},
		"blocked wins over everything": {
			pb:        pb(debugv1beta1.PodBuggerSpec{MaxPods: 1, Suspend: true}),
			o:         observation{now: now, carriers: map[types.UID]carrier{"ua": {name: "a"}}, violations: []policy.Violation{violation}},
			installed: 1, ready: metav1.ConditionFalse, reason: debugv1beta1.ReasonImageNotAllowed, blocked: metav1.ConditionTrue,
		},
		"injection failed": {
			pb:        pb(debugv1beta1.PodBuggerSpec{MaxPods: 10}),
			o:         observation{now: now, carriers: map[types.UID]carrier{}, injectErr: errors.New("forbidden")},
			installed: 0, ready: metav1.ConditionFalse, reason: debugv1beta1.ReasonInjectionFailed, blocked: metav1.ConditionFalse,
		},
		"a remembered refusal keeps Ready false": {
			pb:        pb(debugv1beta1.PodBuggerSpec{MaxPods: 10}),
			o:         observation{now: now, carriers: map[types.UID]carrier{}, refused: []refusal{{pod: "a", attempts: 1, err: "forbidden"}}},
			installed: 0, ready: metav1.ConditionFalse, reason: debugv1beta1.ReasonInjectionFailed, blocked: metav1.ConditionFalse,
		},
		"suspended": {
			pb:        pb(debugv1beta1.PodBuggerSpec{MaxPods: 10, Suspend: true}),
			o:         observation{now: now, carriers: map[types.UID]carrier{}},
			installed: 0, ready: metav1.ConditionTrue, reason: debugv1beta1.ReasonSuspended, blocked: metav1.ConditionFalse,
		},
		"at maxPods": {
			pb:        pb(debugv1beta1.PodBuggerSpec{MaxPods: 1}),
			o:         observation{now: now, carriers: map[types.UID]carrier{"ua": {name: "a"}}},
			installed: 1, ready: metav1.ConditionTrue, reason: debugv1beta1.ReasonMaxPodsReached, blocked: metav1.ConditionFalse,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			s := computeStatus(tt.pb, tt.o)
			if s.Installed != tt.installed || s.ObservedGeneration != 3 {
				t.Errorf("installed %d generation %d, want %d and 3", s.Installed, s.ObservedGeneration, tt.installed)
			}
			ready := meta.FindStatusCondition(s.Conditions, debugv1beta1.ConditionReady)
			blocked := meta.FindStatusCondition(s.Conditions, debugv1beta1.ConditionBlocked)
			if ready == nil || ready.Status != tt.ready || ready.Reason != tt.reason || ready.ObservedGeneration != 3 {
				t.Errorf("Ready = %+v, want %s %s", ready, tt.ready, tt.reason)
			}
			if blocked == nil || blocked.Status != tt.blocked {
				t.Errorf("Blocked = %+v, want %s", blocked, tt.blocked)
			}
			for _, p := range s.Pods {
				if want, ok := tt.times[p.Name]; ok && !p.Time.Equal(&want) {
					t.Errorf("pod %s time %v, want %v", p.Name, p.Time, want)
				}
			}
		})
	}
}

func TestComputeStatusBoundsThePodList(t *testing.T) {
	carriers := map[types.UID]carrier{}
	for i := range debugv1beta1.MaxStatusPods + 20 {
		carriers[types.UID(strings.Repeat("u", i+1))] = carrier{name: strings.Repeat("p", i+1), addedAt: time.Unix(int64(i+1), 0)}
	}
	s := computeStatus(&debugv1beta1.PodBugger{Spec: debugv1beta1.PodBuggerSpec{MaxPods: 1000}},
		observation{now: time.Unix(5000, 0), carriers: carriers})
	if s.Installed != int32(debugv1beta1.MaxStatusPods+20) || len(s.Pods) != debugv1beta1.MaxStatusPods {
		t.Fatalf("installed %d, %d pods listed", s.Installed, len(s.Pods))
	}
	if s.Pods[0].Name != "p" {
		t.Errorf("the earliest pod should come first, got %s", s.Pods[0].Name)
	}
}

func TestDebuggerState(t *testing.T) {
	tests := map[string]struct {
		state   corev1.ContainerState
		want    debugv1beta1.DebuggerState
		reason  string
		message string
	}{
		"no state": {want: debugv1beta1.DebuggerUnknown},
		"running":  {state: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, want: debugv1beta1.DebuggerRunning},
		"creating": {state: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}, want: debugv1beta1.DebuggerStarting, reason: "ContainerCreating"},
		"exited 0": {state: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}, want: debugv1beta1.DebuggerExited, reason: "Completed"},
		"exited 2": {state: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2}}, want: debugv1beta1.DebuggerFailed, reason: "Error", message: "exited with status 2"},
		"run as root refused": {
			state: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError",
				Message: "container has runAsNonRoot and image will run as root"}},
			want: debugv1beta1.DebuggerFailed, reason: "CreateContainerConfigError", message: "container has runAsNonRoot and image will run as root",
		},
		"image pull": {state: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}},
			want: debugv1beta1.DebuggerFailed, reason: "ErrImagePull", message: "not found"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			state, reason, message := debuggerState(tt.state)
			if state != tt.want || reason != tt.reason || message != tt.message {
				t.Errorf("debuggerState = %s %q %q, want %s %q %q", state, reason, message, tt.want, tt.reason, tt.message)
			}
		})
	}
}

func TestStartedCondition(t *testing.T) {
	c := func(state debugv1beta1.DebuggerState) carrier { return carrier{name: string(state), state: state} }
	tests := map[string]struct {
		carriers []carrier
		status   metav1.ConditionStatus
		reason   string
	}{
		"no carrier":                 {status: metav1.ConditionTrue, reason: debugv1beta1.ReasonAllStarted},
		"running and exited":         {carriers: []carrier{c(debugv1beta1.DebuggerRunning), c(debugv1beta1.DebuggerExited)}, status: metav1.ConditionTrue, reason: debugv1beta1.ReasonAllStarted},
		"not reported is unknown":    {carriers: []carrier{c(debugv1beta1.DebuggerRunning), c(debugv1beta1.DebuggerUnknown)}, status: metav1.ConditionUnknown, reason: debugv1beta1.ReasonStatusUnknown},
		"starting wins over unknown": {carriers: []carrier{c(debugv1beta1.DebuggerStarting), c(debugv1beta1.DebuggerUnknown)}, status: metav1.ConditionUnknown, reason: debugv1beta1.ReasonStarting},
		"a failure wins":             {carriers: []carrier{c(debugv1beta1.DebuggerStarting), c(debugv1beta1.DebuggerFailed), c(debugv1beta1.DebuggerRunning)}, status: metav1.ConditionFalse, reason: debugv1beta1.ReasonStartFailed},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			o := observation{carriers: map[types.UID]carrier{}}
			for _, c := range tt.carriers {
				o.carriers[types.UID(c.name)] = c
			}
			got := startedCondition(o)
			if got.Type != debugv1beta1.ConditionStarted || got.Status != tt.status || got.Reason != tt.reason {
				t.Errorf("Started = %s %s (%s), want %s %s", got.Status, got.Reason, got.Message, tt.status, tt.reason)
			}
		})
	}
}
