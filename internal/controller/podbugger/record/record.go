// Package record holds what the PodBugger controller and its incident
// recorder (package incident) both know of a PodIncident record: the notes
// its log fields carry while its log is read and once its pod is gone, the
// slim copy of it the manager's cache keeps, and the count of the failures
// recorded, which the recorder counts and the PodBugger controller forgets
// with its PodBugger.
package record

import (
	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
)

// PendingLogNote is what a record says of its log until the log is read.
const PendingLogNote = "being read: the failed instance's log is written here once its kubelet answers"

// GoneLogNote is what a record says of its log once its pod is gone, unless
// its PodBugger keeps logs. The cache keeps it (Slim): a record
// that says it needs no second patch.
const GoneLogNote = "the pod is gone; its log is not kept (spec.incidents.keepLogsAfterPodDeletion)"

// Slim drops from inc what the controllers never read of a record: the
// manager's cache keeps records slim (podbugger.CacheByObject), and the
// recorder remembers the records it wrote as slim copies.
func Slim(inc *debugv1beta1.PodIncident) {
	inc.ManagedFields = nil
	s := &inc.Spec
	// A record still waiting for its log says so (the constant, which costs
	// no memory): a read its manager queued and did not finish is read again
	// by the next (incident/logs.go). So does a record whose log
	// went with its pod: it is not patched again (podbugger's dropLogsOfGonePods).
	logError := ""
	switch s.LogError {
	case PendingLogNote:
		logError = PendingLogNote
	case GoneLogNote:
		logError = GoneLogNote
	}
	s.LogTail, s.LogError, s.Events, s.Node, s.Resources, s.DebugContainer, s.Pod.Message = "", logError, nil, nil, nil, nil, ""
	if s.LastFailure != nil {
		s.LastFailure.Message = ""
	}
	// The instances' shapes stay (the next failure appends to them), their
	// logs and messages do not.
	for i := range s.Instances {
		in := &s.Instances[i]
		if in.LogError != PendingLogNote && in.LogError != GoneLogNote {
			in.LogError = ""
		}
		in.LogTail, in.Message = "", ""
	}
}
