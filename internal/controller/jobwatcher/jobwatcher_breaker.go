package jobwatcher

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	"github.com/deckhand-dev/deckhand/internal/eventnote"
)

// The deletion circuit breaker. A watcher deletes at most
// spec.maxDeletionsPerMinute Jobs in any minute (a sliding window, counted
// by this controller for each watcher; for a ClusterJobWatcher, for each
// namespace it reaches: one tenant's burst must not stop the cleanup of
// every other namespace); the next due Job trips the breaker: the watcher
// (a ClusterJobWatcher: in that namespace) deletes nothing more, its
// DeletionsPaused condition turns True (a ClusterJobWatcher's
// status.pausedNamespaces names the namespaces held) and an Event says how
// many Jobs were held and names a few. The trip, and what the window
// counted (status.deletionWindows), are in the watcher's status, so a
// restarted or new leader keeps them.
//
// Two things resume it. A spec change (a new generation) resumes with a new
// minute: the change that made the watcher match too much is the usual
// cause, and its fix is a spec change; a change that still matches too much
// trips again after another maxDeletionsPerMinute. The annotation
// batch.deckhand.dev/resume-deletions set to a new value is the owner's
// "yes, delete them" (for a ClusterJobWatcher, in every namespace held): it
// lets the burst in progress through, and the breaker arms again once a
// whole minute passed with fewer deletions than the limit. That is how a
// backlog bigger than the limit (a new watcher over years of history) goes
// with one acknowledgement. Only a newer view of the watcher acknowledges:
// a reconcile that read the watcher before the annotation last changed
// (an older resourceVersion) changes nothing.

// breakerWindow is the breaker's window.
const breakerWindow = time.Minute

// breakerExamples is how many held Jobs the condition and Event name.
const breakerExamples = 5

// maxBreakerScopes bounds the namespaces status.deletionWindows and
// status.pausedNamespaces list.
const maxBreakerScopes = 256

// breaker is one watcher's circuit breaker (a ClusterJobWatcher's, for one
// namespace), kept in its tally.
type breaker struct {
	// generation and resume are the watcher's generation and resume token
	// this state was built under: another one starts a new state.
	generation int64
	resume     string
	// resourceVersion is the watcher's when this state was built: an older
	// view of the watcher changes nothing.
	resourceVersion string
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

// breakerScope is what the governor's breaker counts the Job named job
// (namespace/name) under: its namespace for a ClusterJobWatcher, else "".
func breakerScope(gov *compiledWatcher, job string) string {
	if !gov.cluster {
		return ""
	}
	ns, _, _ := strings.Cut(job, "/")
	return ns
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
// (DeletionsPaused True; for a ClusterJobWatcher, with scope among
// pausedNamespaces), and whether the owner acknowledged it since (the
// resume token is not the one the status was written with).
func pausedInStatus(watcher client.Object, scope string) (paused, acknowledged bool) {
	st := statusOf(watcher)
	if st == nil {
		return false, false
	}
	c := meta.FindStatusCondition(st.Conditions, deckhandbatchv1.ConditionDeletionsPaused)
	if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != watcher.GetGeneration() {
		return false, false
	}
	// A ClusterJobWatcher's trip without pausedNamespaces was written by a
	// release whose breaker counted the watcher as a whole: it held every
	// namespace, and still does (wholeWatcherPaused).
	if scope != "" && len(st.PausedNamespaces) > 0 && !slices.Contains(st.PausedNamespaces, scope) {
		return false, false
	}
	if st.ResumeDeletions != resumeToken(watcher) {
		return false, true
	}
	return true, false
}

// wholeWatcherPaused reports whether a ClusterJobWatcher's status holds a
// trip of a release whose breaker counted the watcher as a whole
// (DeletionsPaused True for this generation, not acknowledged since, and no
// status.pausedNamespaces, which this release always writes with a trip).
// That trip is carried to every namespace the watcher reaches, as it held
// them, rather than cleared: clearing it would let the very burst it
// stopped be deleted without the owner's say, and a deleted Job cannot be
// brought back, while a trip carried only waits for the acknowledgement or
// spec change it waited for before the upgrade. The status keeps that form
// until then, so a restarted manager carries it too.
func wholeWatcherPaused(watcher client.Object) bool {
	w, ok := watcher.(*deckhandbatchv1.ClusterJobWatcher)
	if !ok {
		return false
	}
	c := meta.FindStatusCondition(w.Status.Conditions, deckhandbatchv1.ConditionDeletionsPaused)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == w.Generation &&
		len(w.Status.PausedNamespaces) == 0 && w.Status.ResumeDeletions == resumeToken(w)
}

// windowInStatus is the deletions of scope the watcher's status counted in
// the minute before now, each at the time of the newest of them: a new
// leader holds them against the limit until a minute after that.
func windowInStatus(watcher client.Object, scope string, now time.Time) []time.Time {
	st := statusOf(watcher)
	if st == nil || st.ObservedGeneration != watcher.GetGeneration() {
		return nil
	}
	for _, w := range st.DeletionWindows {
		if w.Namespace != scope || w.Deletions <= 0 || now.Sub(w.Newest.Time) >= breakerWindow {
			continue
		}
		out := make([]time.Time, w.Deletions)
		for i := range out {
			out[i] = w.Newest.Time
		}
		return out
	}
	return nil
}

// olderView reports whether resourceVersion a is older than b; false when
// either is not a number (resourceVersions are etcd revisions).
func olderView(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x < y
}

// breakerOf returns the watcher's breaker for scope, a new one when the
// watcher's generation or resume token changed in a newer view of it: the
// owner resumed it. The caller holds l.mu.
func (l *ledger) breakerOf(watcher client.Object, scope string, now time.Time) *breaker {
	t := l.tally(watcher)
	if t.breakers == nil {
		t.breakers = map[string]*breaker{}
	}
	gen, token, rv := watcher.GetGeneration(), resumeToken(watcher), watcher.GetResourceVersion()
	b := t.breakers[scope]
	switch {
	case b != nil && (gen < b.generation || olderView(rv, b.resourceVersion) || b.generation == gen && b.resume == token):
		// The same watcher, or an older view of it (a reconcile that read
		// it before the change): an older view resets nothing.
		return b
	case b != nil && b.generation == gen:
		// Acknowledged: the burst in progress goes through.
		b = &breaker{generation: gen, resume: token, resourceVersion: rv, deletions: b.deletions, acknowledged: true, quiet: now}
	case b != nil:
		b = &breaker{generation: gen, resume: token, resourceVersion: rv}
	default:
		// First seen by this controller: the status tells whether an
		// earlier one tripped it, and what its window counted.
		paused, acknowledged := pausedInStatus(watcher, scope)
		b = &breaker{generation: gen, resume: token, resourceVersion: rv, deletions: windowInStatus(watcher, scope, now),
			tripped: paused, told: true, acknowledged: acknowledged, quiet: now}
	}
	t.breakers[scope] = b
	return b
}

// admit reports whether the governor may delete the due Job named job
// (namespace/name) now, and counts it when it may. A refusal trips the
// breaker and wakes the watcher's status controller, which tells it.
func (l *ledger) admit(gov *compiledWatcher, job string, now time.Time) bool {
	l.mu.Lock()
	b := l.breakerOf(gov.watcher, breakerScope(gov, job), now)
	b.prune(now)
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

// prune drops the deletions that left the window.
func (b *breaker) prune(now time.Time) {
	cut := 0
	for cut < len(b.deletions) && now.Sub(b.deletions[cut]) >= breakerWindow {
		cut++
	}
	b.deletions = b.deletions[cut:]
}

// breakerState is what the status controller writes of a watcher's
// breakers: whether one is tripped (and which namespaces it holds, for a
// ClusterJobWatcher), what their windows counted, and, for a trip not told
// yet, the Event's note.
type breakerState struct {
	tripped, acknowledged bool
	message               string
	untold                bool
	windows               []deckhandbatchv1.DeletionWindow
	pausedNamespaces      []string
}

// breakerState returns the watcher's breakers as its status shows them, and
// counts their trips told. A ClusterJobWatcher's breakers of namespaces with
// nothing to show are dropped.
func (l *ledger) breakerState(watcher client.Object, limit int, now time.Time) breakerState {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, cluster := watcher.(*deckhandbatchv1.ClusterJobWatcher)
	scopes := []string{""}
	if cluster {
		scopes = l.breakerScopes(watcher)
	}
	var s breakerState
	var held int
	var examples []string
	for _, scope := range scopes {
		b := l.breakerOf(watcher, scope, now)
		b.prune(now)
		if n := len(b.deletions); n > 0 && len(s.windows) < maxBreakerScopes {
			deletions := int32(n) //nolint:gosec // at most the watcher's maxDeletionsPerMinute, an int32
			s.windows = append(s.windows, deckhandbatchv1.DeletionWindow{Namespace: scope, Deletions: deletions,
				Newest: metav1.NewTime(ceilSecond(b.deletions[n-1]))})
		}
		switch {
		case b.tripped:
			s.tripped, s.untold = true, s.untold || !b.told
			b.told = true
			if cluster && len(s.pausedNamespaces) < maxBreakerScopes {
				s.pausedNamespaces = append(s.pausedNamespaces, scope)
			}
			held += len(b.held)
			examples = append(examples, b.examples...)
		case b.acknowledged:
			s.acknowledged = true
		case cluster && len(b.deletions) == 0:
			delete(l.tally(watcher).breakers, scope)
		}
	}
	whole := wholeWatcherPaused(watcher)
	if !s.tripped && !whole {
		return s
	}
	s.tripped, s.acknowledged = true, false
	heldNote := "Jobs due after the limit were held"
	if held > 0 {
		heldNote = fmt.Sprintf("%d due Jobs held (%s", held, strings.Join(examples[:min(len(examples), breakerExamples)], ", "))
		if held > breakerExamples {
			heldNote += ", ..."
		}
		heldNote += ")"
	}
	if whole {
		s.pausedNamespaces = nil
		s.message = fmt.Sprintf("deletions are paused in every namespace this watcher reaches: its breaker tripped under an earlier "+
			"release, which paused the watcher as a whole (spec.maxDeletionsPerMinute is now counted per namespace); %s; "+
			"set the annotation %s to a new value to delete them, or change the spec",
			heldNote, deckhandbatchv1.ResumeDeletionsAnnotation)
		return s
	}
	if cluster {
		s.message = fmt.Sprintf("more than %d Jobs of one namespace were due within a minute (spec.maxDeletionsPerMinute, counted per namespace): "+
			"deletions are paused in %s, %s; the other namespaces are cleaned up as usual; "+
			"set the annotation %s to a new value to delete them, or change the spec",
			limit, eventnote.List(s.pausedNamespaces), heldNote, deckhandbatchv1.ResumeDeletionsAnnotation)
		return s
	}
	s.message = fmt.Sprintf("more than %d Jobs were due within a minute (spec.maxDeletionsPerMinute): deletions are paused, %s; "+
		"set the annotation %s to a new value to delete them, or change the spec",
		limit, heldNote, deckhandbatchv1.ResumeDeletionsAnnotation)
	return s
}

// breakerScopes is every namespace a ClusterJobWatcher's breaker knows of,
// sorted: those it counts, and those its status names (a new leader's). The
// caller holds l.mu.
func (l *ledger) breakerScopes(watcher client.Object) []string {
	set := map[string]bool{}
	for scope := range l.tally(watcher).breakers {
		set[scope] = true
	}
	if st := statusOf(watcher); st != nil {
		for _, ns := range st.PausedNamespaces {
			set[ns] = true
		}
		for _, w := range st.DeletionWindows {
			set[w.Namespace] = true
		}
	}
	delete(set, "")
	return slices.Sorted(maps.Keys(set))
}

// ceilSecond is t rounded up to the second, as a status keeps times: a
// window restored from it ends no earlier than the one counted.
func ceilSecond(t time.Time) time.Time {
	if r := t.Truncate(time.Second); !r.Equal(t) {
		return r.Add(time.Second)
	}
	return t
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
