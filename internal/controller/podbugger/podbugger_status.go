package podbugger

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/policy"
	"github.com/deckhand-dev/deckhand/internal/status"
)

// observation is what one reconcile saw and did, the input of the status.
type observation struct {
	// carriers are the pods that carry the container now (those listed with
	// it plus those it was just added to), by UID.
	carriers map[types.UID]carrier
	// violations are the safety rules the PodBugger breaks.
	violations []policy.Violation
	// memory is what the controller remembers of earlier passes.
	memory *podBuggerMemory
	// refused are the pods whose injection the apiserver refused.
	refused []refusal
	// injectErr is why adding the container to some pod failed otherwise.
	injectErr error
	// superseded says that the apiserver's PodBugger is no longer the one
	// this pass planned with (see changedSince): it injects nothing and
	// writes no status, and the next pass plans with the new one.
	superseded bool
	now        time.Time
	// pods are the pods of pb's namespace as the pass read them (shared
	// with the cache when read from it: never changed).
	pods []corev1.Pod
}

// carrier is a pod that carries the container.
type carrier struct {
	name    string
	addedAt time.Time // zero unless added by this reconcile
	state   debugv1beta1.DebuggerState
	reason  string
	message string
}

// maxMessage bounds the kubelet's message kept in status.pods.
const maxMessage = 256

// carriersOf maps pods that carry the container named name to what their
// kubelets report of it.
func carriersOf(pods []*corev1.Pod, name string) map[types.UID]carrier {
	out := make(map[types.UID]carrier, len(pods))
	for _, pod := range pods {
		c := carrier{name: pod.Name, state: debugv1beta1.DebuggerUnknown}
		for _, s := range pod.Status.EphemeralContainerStatuses {
			if s.Name == name {
				c.state, c.reason, c.message = debuggerState(s.State)
			}
		}
		if len(c.message) > maxMessage {
			c.message = c.message[:maxMessage-3] + "..."
		}
		out[pod.UID] = c
	}
	return out
}

// debuggerState reads a container state as a kubelet reports it. Waiting
// while it is created or its pod initialises is Starting; waiting for any
// other reason (CreateContainerConfigError, ErrImagePull, ImagePullBackOff,
// ...) means it could not start. No state at all is Unknown.
func debuggerState(s corev1.ContainerState) (state debugv1beta1.DebuggerState, reason, message string) {
	switch {
	case s.Running != nil:
		return debugv1beta1.DebuggerRunning, "", ""
	case s.Terminated != nil && s.Terminated.ExitCode == 0:
		return debugv1beta1.DebuggerExited, s.Terminated.Reason, ""
	case s.Terminated != nil:
		return debugv1beta1.DebuggerFailed, cmp.Or(s.Terminated.Reason, "Error"),
			cmp.Or(s.Terminated.Message, fmt.Sprintf("exited with status %d", s.Terminated.ExitCode))
	case s.Waiting != nil && (s.Waiting.Reason == "" || s.Waiting.Reason == "ContainerCreating" || s.Waiting.Reason == "PodInitializing"):
		return debugv1beta1.DebuggerStarting, s.Waiting.Reason, ""
	case s.Waiting != nil:
		return debugv1beta1.DebuggerFailed, s.Waiting.Reason, s.Waiting.Message
	default:
		return debugv1beta1.DebuggerUnknown, "", ""
	}
}

// computeStatus is the whole status from an observation; it is pure (the
// time is o.now). Only the time each pod got the container and the
// conditions' transition times are carried over from the previous status:
// the pod does not record the former.
func computeStatus(pb *debugv1beta1.PodBugger, o observation) debugv1beta1.PodBuggerStatus {
	s := debugv1beta1.PodBuggerStatus{
		ObservedGeneration: pb.Generation,
		Installed:          int32(len(o.carriers)), //nolint:gosec // bounded by the number of pods in a namespace
		Pods:               debuggedPods(pb.Status.Pods, o),
		Conditions:         slices.Clone(pb.Status.Conditions),
	}
	for _, c := range []metav1.Condition{blockedCondition(o), startedCondition(o)} {
		c.ObservedGeneration = pb.Generation
		status.SetCondition(&s.Conditions, c, metav1.NewTime(o.now))
	}
	status.SetHealth(&s.Conditions, pb.Generation, health(pb, o, s.Installed), metav1.NewTime(o.now))
	return s
}

// debuggedPods lists the carriers, the earliest first, at most
// MaxStatusPods; each keeps the time known from before.
func debuggedPods(before []debugv1beta1.DebuggedPod, o observation) []debugv1beta1.DebuggedPod {
	known := map[string]metav1.Time{}
	for _, p := range before {
		known[p.UID] = p.Time
	}
	var pods []debugv1beta1.DebuggedPod
	for uid, c := range o.carriers {
		t, ok := known[string(uid)]
		switch {
		case !c.addedAt.IsZero():
			t = metav1.NewTime(c.addedAt).Rfc3339Copy()
		case !ok:
			t = metav1.NewTime(o.now).Rfc3339Copy()
		}
		pods = append(pods, debugv1beta1.DebuggedPod{Name: c.name, UID: string(uid), Time: t,
			State: c.state, Reason: c.reason, Message: c.message})
	}
	slices.SortFunc(pods, func(a, b debugv1beta1.DebuggedPod) int {
		return cmp.Or(a.Time.Compare(b.Time.Time), cmp.Compare(a.Name, b.Name), cmp.Compare(a.UID, b.UID))
	})
	if len(pods) > debugv1beta1.MaxStatusPods {
		pods = pods[:debugv1beta1.MaxStatusPods]
	}
	return pods
}

func blockedCondition(o observation) metav1.Condition {
	if len(o.violations) > 0 {
		v := o.violations[0]
		return metav1.Condition{Type: debugv1beta1.ConditionBlocked, Status: metav1.ConditionTrue, Reason: v.Reason, Message: v.Err.Error()}
	}
	return metav1.Condition{Type: debugv1beta1.ConditionBlocked, Status: metav1.ConditionFalse,
		Reason: debugv1beta1.ReasonAllowed, Message: "no safety rule stops this PodBugger"}
}

// refusedMessage names the refused pods, at most three, with the
// apiserver's answer.
func refusedMessage(refused []refusal) string {
	parts := make([]string, 0, min(len(refused), 3))
	for _, f := range refused[:min(len(refused), 3)] {
		retry := "retried later"
		if f.attempts >= maxAttempts {
			retry = "not retried until the spec or the namespace's labels change"
		}
		parts = append(parts, fmt.Sprintf("pod %s (%d of %d attempts, %s): %s", f.pod, f.attempts, maxAttempts, retry, f.err))
	}
	return fmt.Sprintf("the apiserver refused the container in %d pods: %s", len(refused), strings.Join(parts, "; "))
}

// startedCondition says whether the containers added run, as far as the
// kubelets report: a failure wins over a container still starting, which
// wins over one no kubelet reports.
func startedCondition(o observation) metav1.Condition {
	byState := map[debugv1beta1.DebuggerState][]string{}
	var failed []string
	for _, c := range o.carriers {
		byState[c.state] = append(byState[c.state], c.name)
		if c.state == debugv1beta1.DebuggerFailed {
			failed = append(failed, fmt.Sprintf("pod %s: %s: %s", c.name, c.reason, c.message))
		}
	}
	slices.Sort(failed)
	n := len(o.carriers)
	switch {
	case len(failed) > 0:
		return metav1.Condition{Type: debugv1beta1.ConditionStarted, Status: metav1.ConditionFalse, Reason: debugv1beta1.ReasonStartFailed,
			Message: fmt.Sprintf("%d of %d debug containers could not start or failed: %s", len(failed), n, strings.Join(failed[:min(len(failed), 3)], "; "))}
	case len(byState[debugv1beta1.DebuggerStarting]) > 0:
		return metav1.Condition{Type: debugv1beta1.ConditionStarted, Status: metav1.ConditionUnknown, Reason: debugv1beta1.ReasonStarting,
			Message: fmt.Sprintf("%d of %d debug containers are starting", len(byState[debugv1beta1.DebuggerStarting]), n)}
	case len(byState[debugv1beta1.DebuggerUnknown]) > 0:
		return metav1.Condition{Type: debugv1beta1.ConditionStarted, Status: metav1.ConditionUnknown, Reason: debugv1beta1.ReasonStatusUnknown,
			Message: fmt.Sprintf("no kubelet reports the state of %d of %d debug containers (yet; simulated nodes never do)", len(byState[debugv1beta1.DebuggerUnknown]), n)}
	default:
		return metav1.Condition{Type: debugv1beta1.ConditionStarted, Status: metav1.ConditionTrue, Reason: debugv1beta1.ReasonAllStarted,
			Message: fmt.Sprintf("%d debug containers run or ran", n)}
	}
}
