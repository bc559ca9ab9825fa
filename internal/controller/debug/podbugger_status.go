package debug

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	debugv1alpha1 "github.com/deckhand-dev/deckhand/api/debug/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/controller/debug/policy"
	"github.com/deckhand-dev/deckhand/internal/status"
)

// observation is what one reconcile saw and did, the input of the status.
type observation struct {
	// carriers are the pods that carry the container now (those listed with
	// it plus those it was just added to), by UID, with the time it was added
	// when this reconcile added it.
	carriers map[types.UID]carrier
	// violations are the safety rules the PodBugger breaks.
	violations []policy.Violation
	// injectErr is why adding the container to some pod failed.
	injectErr error
	now       time.Time
}

type carrier struct {
	name    string
	addedAt time.Time // zero unless added by this reconcile
}

// computeStatus is the whole status from an observation; it is pure (the
// time is o.now). Only the time each pod got the container and the
// conditions' transition times are carried over from the previous status:
// the pod does not record the former.
func computeStatus(pb *debugv1alpha1.PodBugger, o observation) debugv1alpha1.PodBuggerStatus {
	s := debugv1alpha1.PodBuggerStatus{
		ObservedGeneration: pb.Generation,
		Installed:          int32(len(o.carriers)), //nolint:gosec // bounded by the number of pods in a namespace
		Conditions:         slices.Clone(pb.Status.Conditions),
	}

	known := map[string]metav1.Time{}
	for _, p := range pb.Status.Pods {
		known[p.UID] = p.Time
	}
	for uid, c := range o.carriers {
		t, ok := known[string(uid)]
		switch {
		case !c.addedAt.IsZero():
			t = metav1.NewTime(c.addedAt).Rfc3339Copy()
		case !ok:
			t = metav1.NewTime(o.now).Rfc3339Copy()
		}
		s.Pods = append(s.Pods, debugv1alpha1.DebuggedPod{Name: c.name, UID: string(uid), Time: t})
	}
	slices.SortFunc(s.Pods, func(a, b debugv1alpha1.DebuggedPod) int {
		return cmp.Or(a.Time.Compare(b.Time.Time), cmp.Compare(a.Name, b.Name), cmp.Compare(a.UID, b.UID))
	})
	if len(s.Pods) > debugv1alpha1.MaxStatusPods {
		s.Pods = s.Pods[:debugv1alpha1.MaxStatusPods]
	}

	blocked := metav1.Condition{Type: debugv1alpha1.ConditionBlocked, Status: metav1.ConditionFalse,
		Reason: debugv1alpha1.ReasonAllowed, Message: "no safety rule stops this PodBugger"}
	ready := metav1.Condition{Type: debugv1alpha1.ConditionReady, Status: metav1.ConditionTrue}
	switch {
	case len(o.violations) > 0:
		v := o.violations[0]
		blocked.Status, blocked.Reason, blocked.Message = metav1.ConditionTrue, v.Reason, v.Err.Error()
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, v.Reason, "blocked: "+v.Err.Error()
	case o.injectErr != nil:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, debugv1alpha1.ReasonInjectionFailed, o.injectErr.Error()
	case pb.Spec.Suspend:
		ready.Reason, ready.Message = debugv1alpha1.ReasonSuspended, "suspended: no new pod gets the container"
	case s.Installed >= pb.Spec.MaxPods:
		ready.Reason, ready.Message = debugv1alpha1.ReasonMaxPodsReached,
			fmt.Sprintf("%d pods carry the container, the most spec.maxPods allows", s.Installed)
	default:
		ready.Reason, ready.Message = debugv1alpha1.ReasonActive, "matching running pods get the container"
	}
	for _, c := range []metav1.Condition{blocked, ready} {
		c.ObservedGeneration = pb.Generation
		status.SetCondition(&s.Conditions, c, metav1.NewTime(o.now))
	}
	return s
}
