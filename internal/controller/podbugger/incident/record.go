package incident

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/policy"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/record"
	"github.com/deckhand-dev/deckhand/internal/redact"
)

// Defaults of spec.notReadyAfter (of spec.incidents: policy.IncidentLimitsOf),
// applied here as well as by the schema: a PodBugger written as v1alpha1, or
// with webhooks off, may lack them.
const (
	defaultNotReadyAfter = 5 * time.Minute
	// backoffWindow is how close a failure must follow the last one counted
	// in a record to count there rather than open a new record: twice the
	// kubelet's longest restart backoff (5 minutes), so that a crash loop
	// is one record however long it lasts.
	backoffWindow = 10 * time.Minute
	// logTailLines bounds the lines asked of the kubelet; the record keeps
	// the last logTailBytes bytes of them.
	logTailLines = 200
)

func notReadyAfterOf(pb *debugv1beta1.PodBugger) time.Duration {
	if d := pb.Spec.NotReadyAfter; d != nil && d.Duration >= 10*time.Second {
		return d.Duration
	}
	return defaultNotReadyAfter
}

// failure is one failure of a pod, as its status shows it.
type failure struct {
	reason    debugv1beta1.IncidentReason
	container string // empty for a pod-level failure
	// instance is the container's failed instance (nil for NotReady and
	// Evicted); previous says it is the container's previous instance, whose
	// log is read with previous=true, not its current one.
	instance     *corev1.ContainerStateTerminated
	previous     bool
	restartCount int32
	// at is when it happened: the instance's finishedAt, when the pod
	// stopped being Ready, or when it was evicted.
	at time.Time
}

// family is what failures count together: the same container's failed
// instances (whatever the reason they were first seen with: a crash seen as
// Error is the same crash once the kubelet shows it in CrashLoopBackOff),
// a not-ready episode, an eviction.
func (f failure) family() string {
	switch f.reason {
	case debugv1beta1.IncidentNotReady, debugv1beta1.IncidentEvicted:
		return string(f.reason)
	}
	return "container/" + f.container
}

// failuresOf is what failed in pod that triggers name, at now; recheck is
// how soon a pod on its way to NotReady must be looked at again (zero when
// none is). It is pure.
func failuresOf(pod *corev1.Pod, triggers []debugv1beta1.Trigger, notReadyAfter time.Duration, now time.Time) (fs []failure, recheck time.Duration) {
	on := func(t debugv1beta1.Trigger) bool { return slices.Contains(triggers, t) }
	fs = containerFailures(pod, on)
	if on(debugv1beta1.TriggerEvicted) {
		if at, ok := evictedAt(pod); ok {
			fs = append(fs, failure{reason: debugv1beta1.IncidentEvicted, at: at})
		}
	}
	if on(debugv1beta1.TriggerNotReady) && pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil {
		for _, c := range pod.Status.Conditions {
			if c.Type != corev1.PodReady || c.Status == corev1.ConditionTrue {
				continue
			}
			if since := now.Sub(c.LastTransitionTime.Time); since >= notReadyAfter {
				fs = append(fs, failure{reason: debugv1beta1.IncidentNotReady, container: notReadyContainer(pod), at: c.LastTransitionTime.Time})
			} else {
				recheck = notReadyAfter - since
			}
		}
	}
	return fs, recheck
}

// containerFailures are the failures of pod's containers that on triggers.
// An init container that fails (the pod's containers wait for it) is a
// failure too, and so is a sidecar's.
func containerFailures(pod *corev1.Pod, on func(debugv1beta1.Trigger) bool) []failure {
	var fs []failure
	deleting, deletingSince := deletionRequested(pod)
	for _, cs := range containerStatuses(pod) {
		inst, previous := failedInstance(cs)
		if inst == nil {
			continue
		}
		if deleting && !inst.FinishedAt.Time.Before(deletingSince) {
			// Stopped because its pod is being deleted (a rollout, a
			// scale-down, a preemption, kubectl delete): the SIGTERM's
			// exit code, or the SIGKILL's 137 at the grace period's end,
			// is no failure of the program. The instance before it may
			// be one, not counted yet (held back, or missed by a restart).
			last := cs.LastTerminationState.Terminated
			if !failedTerm(last) || !last.FinishedAt.Time.Before(deletingSince) {
				continue
			}
			inst, previous = last, true
		}
		f := failure{container: cs.Name, instance: inst, previous: previous, restartCount: cs.RestartCount, at: inst.FinishedAt.Time}
		oom := inst.Reason == kubeletOOMKilled
		switch {
		case oom && on(debugv1beta1.TriggerOOMKilled):
			f.reason = debugv1beta1.IncidentOOMKilled
		case cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff" && on(debugv1beta1.TriggerCrashLoopBackOff):
			f.reason = debugv1beta1.IncidentCrashLoopBackOff
		case !oom && on(debugv1beta1.TriggerError):
			f.reason = debugv1beta1.IncidentError
		default:
			continue
		}
		fs = append(fs, f)
	}
	return fs
}

// deletionRequested says whether pod is being deleted and since when: its
// deletionTimestamp is the request's time plus the grace period. A second's
// slack covers finishedAt's whole seconds.
func deletionRequested(pod *corev1.Pod) (bool, time.Time) {
	if pod.DeletionTimestamp == nil {
		return false, time.Time{}
	}
	grace := time.Duration(ptr.Deref(pod.DeletionGracePeriodSeconds, 0)) * time.Second
	return true, pod.DeletionTimestamp.Add(-grace).Add(-time.Second)
}

// failedTerm says whether a terminated instance failed. An OOM kill of a
// child process (the container's shell goes on and exits 0) is reported
// with the reason OOMKilled and exit code 0: it is a failure all the same.
func failedTerm(t *corev1.ContainerStateTerminated) bool {
	return t != nil && (t.ExitCode != 0 || t.Signal != 0 || t.Reason == kubeletOOMKilled)
}

// failedInstance is the container's instance that failed last: its current
// one when that terminated with an error (or was OOM-killed), else its previous one when that
// did and the container has been restarted since (or waits to be).
func failedInstance(cs corev1.ContainerStatus) (inst *corev1.ContainerStateTerminated, previous bool) {
	failed := failedTerm
	switch {
	case cs.State.Terminated != nil:
		if failed(cs.State.Terminated) {
			return cs.State.Terminated, false
		}
	case failed(cs.LastTerminationState.Terminated):
		return cs.LastTerminationState.Terminated, true
	}
	return nil, false
}

// evictedAt reports whether pod was evicted (by its kubelet, or through the
// eviction API: the DisruptionTarget condition says which) and when. An
// eviction without the condition (a kubelet older than 1.26, or one that
// set none) is dated by the pod's status (lastStatusTime), never by the
// pass that sees it: a time that stays put, so that every pass, and every
// manager after a restart or failover, counts it once.
func evictedAt(pod *corev1.Pod) (time.Time, bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue &&
			(c.Reason == "EvictionByEvictionAPI" || c.Reason == "TerminationByKubelet") {
			return c.LastTransitionTime.Time, true
		}
	}
	if pod.Status.Phase == corev1.PodFailed && pod.Status.Reason == "Evicted" {
		return lastStatusTime(pod), true
	}
	return time.Time{}, false
}

// lastStatusTime is the latest time pod's status records: its containers'
// terminations and its conditions' transitions (an eviction ends both);
// failing those, when it was deleted, started or created.
func lastStatusTime(pod *corev1.Pod) time.Time {
	var at time.Time
	later := func(t metav1.Time) {
		if t.After(at) {
			at = t.Time
		}
	}
	for _, cs := range containerStatuses(pod) {
		if t := cs.State.Terminated; t != nil {
			later(t.FinishedAt)
		}
	}
	for _, c := range pod.Status.Conditions {
		later(c.LastTransitionTime)
	}
	for _, t := range []*metav1.Time{pod.DeletionTimestamp, pod.Status.StartTime, &pod.CreationTimestamp} {
		if at.IsZero() && t != nil {
			later(*t)
		}
	}
	return at
}

// notReadyContainer names the first container that is not ready, if any.
func notReadyContainer(pod *corev1.Pod) string {
	for _, cs := range pod.Status.ContainerStatuses {
		if !cs.Ready {
			return cs.Name
		}
	}
	return ""
}

// counted reports whether f is already counted in one of recs: a record of
// its family whose last failure is not older than f.
func counted(f failure, recs []debugv1beta1.PodIncident) bool {
	at := metav1.NewTime(f.at).Rfc3339Copy()
	return slices.ContainsFunc(recs, func(r debugv1beta1.PodIncident) bool {
		return familyOf(&r) == f.family() && !r.Spec.LastTime.Before(&at)
	})
}

// familyOf is the family of the failures a record counts.
func familyOf(r *debugv1beta1.PodIncident) string {
	return failure{reason: r.Spec.Reason, container: r.Spec.Container}.family()
}

// recordFor is the record f counts in: the latest of recs with f's reason
// and container whose last failure is within backoffWindow before f, or nil
// when f opens a new one.
func recordFor(f failure, recs []debugv1beta1.PodIncident) *debugv1beta1.PodIncident {
	var found *debugv1beta1.PodIncident
	for i := range recs {
		r := &recs[i]
		if r.Spec.Reason == f.reason && r.Spec.Container == f.container && f.at.Sub(r.Spec.LastTime.Time) <= backoffWindow &&
			(found == nil || r.Spec.LastTime.After(found.Spec.LastTime.Time)) {
			found = r
		}
	}
	return found
}

// incidentName is the name of the record f opens: the pod's name, the
// reason and a hash of the PodBugger, pod, container, reason and time, so
// that a pass repeated after a crash finds the record it wrote.
func incidentName(pbUID, podName, podUID string, f failure) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%s/%s/%s/%d", pbUID, podUID, f.container, f.reason, f.at.Unix()))
	suffix := "-" + strings.ToLower(string(f.reason)) + "-" + hex.EncodeToString(sum[:])[:10]
	return strings.TrimRight(podName[:min(len(podName), 253-len(suffix))], ".-") + suffix
}

// capture is what was read of a failure besides the pod's status.
type capture struct {
	logTail, logError string
	logTruncated      bool
	events            []corev1.Event
	node              *debugv1beta1.IncidentNode
	debug             *debugv1beta1.IncidentDebugContainer
	// scrub cleans what the record keeps of the tenant's text.
	scrub scrub
}

// newIncident is the record f opens, for pb and pod. It is pure.
func newIncident(pb *debugv1beta1.PodBugger, pod *corev1.Pod, f failure, c capture) *debugv1beta1.PodIncident {
	t := metav1.NewTime(f.at).Rfc3339Copy()
	inc := &debugv1beta1.PodIncident{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: pb.Namespace,
			Name:      incidentName(string(pb.UID), pod.Name, string(pod.UID), f),
			Labels: map[string]string{
				debugv1beta1.IncidentPodBuggerUIDLabel: string(pb.UID),
				debugv1beta1.IncidentPodUIDLabel:       string(pod.UID),
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: debugv1beta1.GroupVersion.String(), Kind: "PodBugger",
				Name: pb.Name, UID: pb.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Spec: debugv1beta1.PodIncidentSpec{PodBugger: pb.Name, Container: f.container, Reason: f.reason,
			FirstTime: t, LastTime: t},
	}
	if pb.Spec.Incidents != nil && len(pb.Spec.Incidents.Notify) > 0 {
		inc.Annotations = map[string]string{debugv1beta1.NotificationAnnotation: debugv1beta1.NotificationOpened}
	}
	updateIncident(inc, pod, f, c, policy.IncidentLimitsOf(pb).Instances)
	return inc
}

// updateIncident counts f in inc, replaces what inc holds of the last
// failure with f's and what c read, and adds f's instance to the record's
// last keep instances. It is pure.
func updateIncident(inc *debugv1beta1.PodIncident, pod *corev1.Pod, f failure, c capture, keep int) {
	s := &inc.Spec
	s.Count++
	s.LastTime = metav1.NewTime(f.at).Rfc3339Copy()
	s.Pod = debugv1beta1.IncidentPod{Name: pod.Name, UID: string(pod.UID), Phase: string(pod.Status.Phase),
		Message: c.scrub.clean(pod.Status.Message, debugv1beta1.MaxIncidentMessage)}
	s.LastFailure = nil
	class, explanation := classify(pod, f, c.events)
	s.Class = class
	if i := f.instance; i != nil {
		s.LastFailure = &debugv1beta1.FailedInstance{ExitCode: i.ExitCode, Signal: i.Signal, Reason: cut(i.Reason, 128),
			Message: c.scrub.clean(i.Message, debugv1beta1.MaxIncidentMessage), StartedAt: i.StartedAt, FinishedAt: i.FinishedAt,
			ContainerID: cut(i.ContainerID, 256), RestartCount: f.restartCount,
			Class: class, Explanation: c.scrub.clean(explanation, 256)}
	}
	s.LogTail, s.LogTruncated, s.LogError = c.logTail, c.logTruncated, c.scrub.clean(c.logError, debugv1beta1.MaxIncidentMessage)
	if s.LastFailure != nil {
		s.Instances = keepInstances(s.Instances, debugv1beta1.IncidentInstance{FailedInstance: *s.LastFailure,
			LogTail: s.LogTail, LogTruncated: s.LogTruncated, LogError: s.LogError}, keep)
	}
	s.Events = incidentEvents(c.events, c.scrub)
	s.Node = c.node
	s.QOSClass = string(pod.Status.QOSClass)
	s.Resources, s.ContainerKind = nil, ""
	for _, ct := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		if ct.Name != f.container || f.container == "" {
			continue
		}
		s.ContainerKind = containerKind(pod, ct)
		if len(ct.Resources.Requests) > 0 || len(ct.Resources.Limits) > 0 {
			s.Resources = &corev1.ResourceRequirements{Requests: ct.Resources.Requests, Limits: ct.Resources.Limits}
		}
	}
	s.DebugContainer = c.debug
}

// containerKind is the kind of pod's container c.
func containerKind(pod *corev1.Pod, c corev1.Container) debugv1beta1.ContainerKind {
	if !slices.ContainsFunc(pod.Spec.InitContainers, func(i corev1.Container) bool { return i.Name == c.Name }) {
		return debugv1beta1.ContainerKindContainer
	}
	if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
		return debugv1beta1.ContainerKindSidecar
	}
	return debugv1beta1.ContainerKindInit
}

// incidentEvents are the latest MaxIncidentEvents of events, the latest
// last, each message cut.
func incidentEvents(events []corev1.Event, sc scrub) []debugv1beta1.IncidentEvent {
	last := func(e *corev1.Event) time.Time {
		return cmp.Or(e.LastTimestamp.Time, e.EventTime.Time, e.FirstTimestamp.Time, e.CreationTimestamp.Time)
	}
	sorted := slices.Clone(events)
	slices.SortStableFunc(sorted, func(a, b corev1.Event) int { return last(&a).Compare(last(&b)) })
	sorted = sorted[max(0, len(sorted)-debugv1beta1.MaxIncidentEvents):]
	out := make([]debugv1beta1.IncidentEvent, 0, len(sorted))
	for i := range sorted {
		e := &sorted[i]
		out = append(out, debugv1beta1.IncidentEvent{Time: metav1.NewTime(last(e)).Rfc3339Copy(), Type: cut(e.Type, 32),
			Reason: cut(e.Reason, 128), Message: sc.clean(e.Message, debugv1beta1.MaxIncidentEventMessage), Count: max(e.Count, 1)})
	}
	return out
}

// nodePressure is what a record says of node: the pressure conditions
// that are True, and NotReady unless it is Ready.
func nodePressure(node *corev1.Node) *debugv1beta1.IncidentNode {
	n := &debugv1beta1.IncidentNode{Name: node.Name}
	for _, c := range node.Status.Conditions {
		switch c.Type {
		case corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure:
			if c.Status == corev1.ConditionTrue {
				n.Pressure = append(n.Pressure, string(c.Type))
			}
		case corev1.NodeReady:
			if c.Status != corev1.ConditionTrue {
				n.Pressure = append(n.Pressure, "NotReady")
			}
		}
	}
	return n
}

// keepInstances adds latest to a record's instances and keeps the last keep
// of them, oldest first (policy.IncidentLimitsOf bounds keep so that their log tails fit
// MaxIncidentInstanceLogs together). An earlier instance whose log was
// still being read will not be: the kubelet keeps one dead instance per
// container, and latest replaced it.
func keepInstances(instances []debugv1beta1.IncidentInstance, latest debugv1beta1.IncidentInstance, keep int) []debugv1beta1.IncidentInstance {
	out := slices.Clone(instances)
	for i := range out {
		if out[i].LogError == record.PendingLogNote {
			out[i].LogError = lostLogNote
		}
	}
	out = append(out, latest)
	return out[max(0, len(out)-keep):]
}

// lostLogNote is the logError of an instance whose log was not read before
// the container failed again.
const lostLogNote = "not read: the container failed again before this instance's log was read; the kubelet keeps only the last instance's log"

// scrub is how a PodBugger's records are cleaned of secrets: with the
// built-in detectors and its own patterns (spec.incidents.redact). When one
// of its patterns cannot be used (the webhook refuses such a PodBugger; with
// webhooks off one can be stored), a record keeps no tenant text at all
// rather than what the pattern was to remove. The zero value is the
// built-in detectors alone.
type scrub struct {
	r *redact.Redactor
	// unusable names the pattern that cannot be used.
	unusable string
}

// text is s with what scrub removes removed.
func (sc scrub) text(s string) string {
	switch {
	case sc.unusable != "":
		return redact.Marker("unusable " + sc.unusable)
	case sc.r != nil:
		s, _ = sc.r.Redact(s)
		return s
	}
	return redact.String(s)
}

// with is sc removing the exact values too.
func (sc scrub) with(values []string) scrub {
	switch {
	case sc.unusable != "" || len(values) == 0:
		return sc
	case sc.r == nil:
		return scrub{r: redact.New(nil, values)}
	}
	return scrub{r: sc.r.With(values)}
}

// clean is tenant text as a record keeps it: its credentials removed, cut
// to n bytes.
func (sc scrub) clean(s string, n int) string { return cut(sc.text(s), n) }

// tail is the end of a log as a record keeps it: its credentials removed
// (its first line dropped when the read was cut: it may begin inside one),
// then its last n bytes (and whether that cut it).
func (sc scrub) tail(s string, truncated bool, n int) (string, bool) {
	return tail(sc.text(redact.DropCutLine(s, truncated)), n)
}

// cut shortens s to at most n bytes, on a rune boundary, marking the cut.
func cut(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	s = s[:n-3]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "..."
}

// tail keeps the last n bytes of s, from a rune boundary, as valid UTF-8.
func tail(s string, n int) (string, bool) {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s, false
	}
	s = s[len(s)-n:]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return s, true
}
