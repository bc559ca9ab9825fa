package debug

import (
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	debugv1alpha1 "github.com/deckhand-dev/deckhand/api/debug/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/controller/debug/policy"
)

func TestComputeStatus(t *testing.T) {
	now := time.Unix(1000, 0)
	earlier := metav1.NewTime(time.Unix(500, 0))
	pb := func(spec debugv1alpha1.PodBuggerSpec, pods ...debugv1alpha1.DebuggedPod) *debugv1alpha1.PodBugger {
		return &debugv1alpha1.PodBugger{ObjectMeta: metav1.ObjectMeta{Generation: 3}, Spec: spec,
			Status: debugv1alpha1.PodBuggerStatus{Pods: pods}}
	}
	violation := policy.Violation{Reason: debugv1alpha1.ReasonImageNotAllowed,
		Err: field.Forbidden(field.NewPath("spec", "image"), "no")}

	tests := map[string]struct {
		pb        *debugv1alpha1.PodBugger
		o         observation
		installed int32
		ready     metav1.ConditionStatus
		reason    string
		blocked   metav1.ConditionStatus
		times     map[string]metav1.Time
	}{
		"active; a known pod keeps its time, a new one gets the injection time": {
			pb: pb(debugv1alpha1.PodBuggerSpec{MaxPods: 10}, debugv1alpha1.DebuggedPod{Name: "a", UID: "ua", Time: earlier}),
			o: observation{now: now, carriers: map[types.UID]carrier{
				"ua": {name: "a"}, "ub": {name: "b", addedAt: time.Unix(900, 0)}, "uc": {name: "c"}}},
			installed: 3, ready: metav1.ConditionTrue, reason: debugv1alpha1.ReasonActive, blocked: metav1.ConditionFalse,
			times: map[string]metav1.Time{"a": earlier, "b": metav1.NewTime(time.Unix(900, 0)), "c": metav1.NewTime(now)},
		},
		"blocked wins over everything": {
			pb:        pb(debugv1alpha1.PodBuggerSpec{MaxPods: 1, Suspend: true}),
			o:         observation{now: now, carriers: map[types.UID]carrier{"ua": {name: "a"}}, violations: []policy.Violation{violation}},
			installed: 1, ready: metav1.ConditionFalse, reason: debugv1alpha1.ReasonImageNotAllowed, blocked: metav1.ConditionTrue,
		},
		"injection failed": {
			pb:        pb(debugv1alpha1.PodBuggerSpec{MaxPods: 10}),
			o:         observation{now: now, carriers: map[types.UID]carrier{}, injectErr: errors.New("forbidden")},
			installed: 0, ready: metav1.ConditionFalse, reason: debugv1alpha1.ReasonInjectionFailed, blocked: metav1.ConditionFalse,
		},
		"suspended": {
			pb:        pb(debugv1alpha1.PodBuggerSpec{MaxPods: 10, Suspend: true}),
			o:         observation{now: now, carriers: map[types.UID]carrier{}},
			installed: 0, ready: metav1.ConditionTrue, reason: debugv1alpha1.ReasonSuspended, blocked: metav1.ConditionFalse,
		},
		"at maxPods": {
			pb:        pb(debugv1alpha1.PodBuggerSpec{MaxPods: 1}),
			o:         observation{now: now, carriers: map[types.UID]carrier{"ua": {name: "a"}}},
			installed: 1, ready: metav1.ConditionTrue, reason: debugv1alpha1.ReasonMaxPodsReached, blocked: metav1.ConditionFalse,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			s := computeStatus(tt.pb, tt.o)
			if s.Installed != tt.installed || s.ObservedGeneration != 3 {
				t.Errorf("installed %d generation %d, want %d and 3", s.Installed, s.ObservedGeneration, tt.installed)
			}
			ready := meta.FindStatusCondition(s.Conditions, debugv1alpha1.ConditionReady)
			blocked := meta.FindStatusCondition(s.Conditions, debugv1alpha1.ConditionBlocked)
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
	for i := range debugv1alpha1.MaxStatusPods + 20 {
		carriers[types.UID(strings.Repeat("u", i+1))] = carrier{name: strings.Repeat("p", i+1), addedAt: time.Unix(int64(i+1), 0)}
	}
	s := computeStatus(&debugv1alpha1.PodBugger{Spec: debugv1alpha1.PodBuggerSpec{MaxPods: 1000}},
		observation{now: time.Unix(5000, 0), carriers: carriers})
	if s.Installed != int32(debugv1alpha1.MaxStatusPods+20) || len(s.Pods) != debugv1alpha1.MaxStatusPods {
		t.Fatalf("installed %d, %d pods listed", s.Installed, len(s.Pods))
	}
	if s.Pods[0].Name != "p" {
		t.Errorf("the earliest pod should come first, got %s", s.Pods[0].Name)
	}
}
