package jobwatcher

import (
	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	"github.com/deckhand-dev/deckhand/internal/status"
)

// health judges a watcher: stalled while its spec cannot be compiled or
// its deletion circuit breaker holds its deletions for its owner's word;
// otherwise settled (a suspended watcher too: it does what its spec asks).
func health(self *compiledWatcher, s summary) status.Health {
	switch {
	case self.err != nil:
		return status.Health{Stalled: true, Reason: deckhandbatchv1.ReasonInvalidSpec, Message: self.err.Error() + "; the watcher matches no Job"}
	case s.Breaker.tripped:
		return status.Health{Stalled: true, Reason: deckhandbatchv1.ReasonTooManyDeletions, Message: s.Breaker.message}
	case self.spec.Suspend:
		return status.Health{Ready: true, Reason: deckhandbatchv1.ReasonSuspended, Message: "suspended: the Jobs this watcher governs are kept until it resumes"}
	case self.spec.DryRun:
		return status.Health{Ready: true, Reason: deckhandbatchv1.ReasonDryRun, Message: "dry run: expired Jobs are listed in status.wouldDelete, none is deleted"}
	}
	return status.Health{Ready: true, Reason: deckhandbatchv1.ReasonActive, Message: "deleting the finished Jobs this watcher governs when they expire"}
}
