package jobwatcher

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
)

// The deletion circuit breaker. A watcher deletes at most
// spec.maxDeletionsPerMinute Jobs in any minute (a sliding window, counted
// by this controller for each watcher); the next due Job trips the breaker:
// the watcher deletes nothing more, its DeletionsPaused condition turns True
// and an Event says how many Jobs were held and names a few. The trip is in
// the watcher's status, so a restarted or new leader keeps it.
//
// Two things resume it. A spec change (a new generation) resumes with a new
// minute: the change that made the watcher match too much is the usual
// cause, and its fix is a spec change; a change that still matches too much
// trips again after another maxDeletionsPerMinute. The annotation
// batch.deckhand.dev/resume-deletions set to a new value is the owner's
// "yes, delete them": it lets the burst in progress through, and the
// breaker arms again once a whole minute passed with fewer deletions than
// the limit. That is how a backlog bigger than the limit (a new watcher
// over years of history) goes with one acknowledgement.

// breakerWindow is the breaker's window.
const breakerWindow = time.Minute

// breakerExamples is how many held Jobs the condition and Event name.
const breakerExamples = 5

// breaker is one watcher's circuit breaker, kept in its tally.
type breaker struct {
	// generation and resume are the watcher's generation and resume token
	// this state was built under: another one starts a new state.
	generation int64
	resume     string
	// deletions are when the deletions of the last window were admitted.
	deletions []time.Time
	// tripped: nothing is deleted; held are the due Jobs refused since
	// (namespace/name), examples the first few of them.
	tripped  bool
	held     map[string]struct{}
	examples []string
	// told: the Event of this trip was recorded.
	told bool
	// acknowledged lets a burst through until a whole window passes, after
	// quiet (the last time the window was full), with fewer deletions than
	// the limit.
	acknowledged bool
	quiet        time.Time
}

// maxDeletionsPerMinute is the watcher's breaker limit.
func (p *compiledWatcher) maxDeletionsPerMinute() int {
	if p.spec.MaxDeletionsPerMinute != nil && *p.spec.MaxDeletionsPerMinute > 0 {
		return int(*p.spec.MaxDeletionsPerMinute)
	}
	return deckhandbatchv1.DefaultMaxDeletionsPerMinute
}

// resumeToken is the watcher's resume-deletions annotation as the status
// keeps it: itself when short, else a digest (an annotation may be far
// longer than a status field should be).
func resumeToken(watcher client.Object) string {
	v := watcher.GetAnnotations()[deckhandbatchv1.ResumeDeletionsAnnotation]
	if len(v) <= 64 {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// statusOf is the status of a watcher of either kind.
func statusOf(watcher client.Object) *deckhandbatchv1.JobWatcherStatus {
	switch w := watcher.(type) {
	case *deckhandbatchv1.JobWatcher:
		return &w.Status
	case *deckhandbatchv1.ClusterJobWatcher:
		return &w.Status
	}
	return nil
}

// pausedInStatus reports whether the watcher's status, as written by an
// earlier controller, says its breaker tripped for this generation
// (DeletionsPaused True), and whether the owner acknowledged it since (the
// resume token is not the one the status was written with).
func pausedInStatus(watcher client.Object) (paused, acknowledged bool) {
	st := statusOf(watcher)
	if st == nil {
		return false, false
	}
	c := meta.FindStatusCondition(st.Conditions, deckhandbatchv1.ConditionDeletionsPaused)
	if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != watcher.GetGeneration() {
		return false, false
	}
	if st.ResumeDeletions != resumeToken(watcher) {
		return false, true
	}
	return true, false
}

// breakerOf returns the watcher's breaker, a new one when the watcher's
// generation or resume token changed: the owner resumed it. The caller
// holds l.mu.
func (l *ledger) breakerOf(watcher client.Object, now time.Time) *breaker {
	t := l.tally(watcher)
	gen, token := watcher.GetGeneration(), resumeToken(watcher)
	b := t.breaker
	switch {
	case b != nil && (gen < b.generation || b.generation == gen && b.resume == token):
		// The same watcher, or an older view of it (a reconcile that read
		// it before the change): an older view resets nothing.
		return b
	case b != nil && b.generation == gen:
		// Acknowledged: the burst in progress goes through.
		t.breaker = &breaker{generation: gen, resume: token, deletions: b.deletions, acknowledged: true, quiet: now}
	case b != nil:
		t.breaker = &breaker{generation: gen, resume: token}
	default:
		// First seen by this controller: the status tells whether an
		// earlier one tripped it.
		paused, acknowledged := pausedInStatus(watcher)
		t.breaker = &breaker{generation: gen, resume: token, tripped: paused, told: true, acknowledged: acknowledged, quiet: now}
	}
	return t.breaker
}

// admit reports whether the governor may delete the due Job named job
// (namespace/name) now, and counts it when it may. A refusal trips the
// breaker and wakes the watcher's status controller, which tells it.
func (l *ledger) admit(gov *compiledWatcher, job string, now time.Time) bool {
	l.mu.Lock()
	b := l.breakerOf(gov.watcher, now)
	cut := 0
	for cut < len(b.deletions) && now.Sub(b.deletions[cut]) >= breakerWindow {
		cut++
	}
	b.deletions = b.deletions[cut:]
	limit := gov.maxDeletionsPerMinute()
	if b.acknowledged && now.Sub(b.quiet) >= breakerWindow {
		b.acknowledged = false
	}
	if !b.tripped && len(b.deletions) >= limit {
		if b.acknowledged {
			b.quiet = now
		} else {
			b.tripped, b.told = true, false
		}
	}
	if b.tripped {
		if _, ok := b.held[job]; !ok {
			if b.held == nil {
				b.held = map[string]struct{}{}
			}
			b.held[job] = struct{}{}
			if len(b.examples) < breakerExamples {
				b.examples = append(b.examples, job)
			}
		}
		l.mu.Unlock()
		select {
		case l.notify <- event.GenericEvent{Object: gov.watcher}:
		default:
			// The status controller is woken already.
		}
		return false
	}
	b.deletions = append(b.deletions, now)
	l.mu.Unlock()
	return true
}

// breakerState is what the status controller writes of a watcher's
// breaker: whether it is tripped, and, for a trip not told yet, the Event's
// note.
type breakerState struct {
	tripped, acknowledged bool
	message               string
	untold                bool
}

// breakerState returns the watcher's breaker as its status shows it, and
// counts its trip told.
func (l *ledger) breakerState(watcher client.Object, limit int, now time.Time) breakerState {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.breakerOf(watcher, now)
	if !b.tripped {
		return breakerState{acknowledged: b.acknowledged}
	}
	s := breakerState{tripped: true, untold: !b.told}
	b.told = true
	held := "Jobs due after the limit were held"
	if len(b.held) > 0 {
		held = fmt.Sprintf("%d due Jobs held (%s", len(b.held), strings.Join(b.examples, ", "))
		if len(b.held) > len(b.examples) {
			held += ", ..."
		}
		held += ")"
	}
	s.message = fmt.Sprintf("more than %d Jobs were due within a minute (spec.maxDeletionsPerMinute): deletions are paused, %s; "+
		"set the annotation %s to a new value to delete them, or change the spec",
		limit, held, deckhandbatchv1.ResumeDeletionsAnnotation)
	return s
}

// resumeAnnotationChanged passes the watcher updates that acknowledge a
// tripped breaker.
var resumeAnnotationChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld != nil && e.ObjectNew != nil && resumeToken(e.ObjectOld) != resumeToken(e.ObjectNew)
	},
}
