package jobwatcher

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
)

// admitted counts how many of n due Jobs the breaker lets p delete at now.
func admitted(l *ledger, p *compiledWatcher, n int, now time.Time) int {
	ok := 0
	for range n {
		if l.admit(p, "ns/job", now) {
			ok++
		}
	}
	return ok
}

// admittedAs is admitted for n judgements of one Job, named job.
func admittedAs(l *ledger, p *compiledWatcher, job string, n int, now time.Time) int {
	ok := 0
	for range n {
		if l.admit(p, job, now) {
			ok++
		}
	}
	return ok
}

func TestBreakerWindow(t *testing.T) {
	l := newLedger()
	p := jw("ns", "w", ptr.To[int32](60), nil, func(s *deckhandbatchv1.JobPolicy) { s.MaxDeletionsPerMinute = ptr.To[int32](10) })
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

	// Ten in one minute go, spread or not; the eleventh trips the breaker.
	if got := admitted(l, p, 5, t0) + admitted(l, p, 4, t0.Add(30*time.Second)); got != 9 {
		t.Fatalf("admitted %d of the first 9, want 9", got)
	}
	if !l.admit(p, "ns/job", t0.Add(30*time.Second)) || l.admit(p, "ns/eleventh", t0.Add(59*time.Second)) {
		t.Fatal("the 11th deletion within a minute was admitted")
	}
	// Tripped, it stays tripped when the minute is over.
	if admittedAs(l, p, "ns/later", 2, t0.Add(time.Hour)) != 0 {
		t.Fatal("a tripped breaker let a deletion through an hour later")
	}
	s := l.breakerState(p.watcher, 10, t0.Add(time.Hour))
	if !s.tripped || !s.untold || !strings.Contains(s.message, "2 due Jobs held (ns/eleventh, ns/later)") {
		t.Fatalf("breakerState = %+v, want tripped, untold, 2 held", s)
	}
	if s := l.breakerState(p.watcher, 10, t0.Add(time.Hour)); s.untold {
		t.Fatal("the trip was told twice")
	}

	// Acknowledged: the burst goes through, as long as it lasts...
	p.watcher.SetAnnotations(map[string]string{deckhandbatchv1.ResumeDeletionsAnnotation: "ok"})
	t1 := t0.Add(2 * time.Hour)
	for i := range 5 {
		if got := admitted(l, p, 30, t1.Add(time.Duration(i)*30*time.Second)); got != 30 {
			t.Fatalf("acknowledged: admitted %d of 30, want all", got)
		}
	}
	// ...and the breaker arms again after a quiet minute.
	t2 := t1.Add(5 * time.Minute)
	if got := admitted(l, p, 11, t2); got != 10 {
		t.Fatalf("after a quiet minute: admitted %d of 11, want 10", got)
	}

	// A new generation starts a new minute.
	p.watcher.SetGeneration(2)
	if got := admitted(l, p, 11, t2); got != 10 {
		t.Fatalf("after a spec change: admitted %d of 11, want 10", got)
	}
}

func TestBreakerDefaultAndStatus(t *testing.T) {
	p := jw("ns", "w", ptr.To[int32](60), nil)
	if got := p.maxDeletionsPerMinute(); got != deckhandbatchv1.DefaultMaxDeletionsPerMinute {
		t.Fatalf("default limit %d, want %d", got, deckhandbatchv1.DefaultMaxDeletionsPerMinute)
	}
	l := newLedger()
	if got := admitted(l, p, 1200, time.Now()); got != 1000 {
		t.Fatalf("admitted %d of 1200 due at once, want the default 1000", got)
	}

	// A trip in the status of an earlier controller holds; a new resume
	// token or generation releases it.
	w := p.watcher.(*deckhandbatchv1.JobWatcher)
	w.Generation = 4
	w.Status.Conditions = []metav1.Condition{{Type: deckhandbatchv1.ConditionDeletionsPaused, Status: metav1.ConditionTrue, ObservedGeneration: 4}}
	w.Status.ResumeDeletions = "a"
	w.Annotations = map[string]string{deckhandbatchv1.ResumeDeletionsAnnotation: "a"}
	if paused, _ := pausedInStatus(w, ""); !paused || admitted(newLedger(), p, 1, time.Now()) != 0 {
		t.Fatal("a trip in the status did not hold")
	}
	// Acknowledged while no controller ran: the burst goes through.
	w.Annotations[deckhandbatchv1.ResumeDeletionsAnnotation] = "b"
	if paused, acknowledged := pausedInStatus(w, ""); paused || !acknowledged {
		t.Fatal("a new resume token did not acknowledge the trip in the status")
	}
	if got := admitted(newLedger(), p, 1500, time.Now()); got != 1500 {
		t.Fatalf("acknowledged in the status: admitted %d of 1500, want all", got)
	}
	w.Annotations[deckhandbatchv1.ResumeDeletionsAnnotation] = "a"
	w.Generation = 5
	if paused, acknowledged := pausedInStatus(w, ""); paused || acknowledged {
		t.Fatal("a new generation did not start afresh")
	}

	// An older view of the watcher (a reconcile that read it before a spec
	// change) starts no new minute.
	l = newLedger()
	if got := admitted(l, p, 1000, time.Now()); got != 1000 {
		t.Fatalf("admitted %d of 1000, want 1000", got)
	}
	w.Generation = 4
	if got := admitted(l, p, 1, time.Now()); got != 0 {
		t.Fatal("an older generation reset the breaker")
	}

	// A long annotation is kept as a digest the status field holds.
	w.Annotations[deckhandbatchv1.ResumeDeletionsAnnotation] = strings.Repeat("x", 1000)
	if got := resumeToken(w); len(got) > 128 || !strings.HasPrefix(got, "sha256:") {
		t.Fatalf("resumeToken of a long annotation = %q", got)
	}
}

// A new leader honours the window of the one before: the status the old
// leader wrote says how many Jobs went in the last minute, and the new
// leader's breaker counts them, so two failovers within a minute do not
// make room for twice or three times spec.maxDeletionsPerMinute.
func TestBreakerWindowSurvivesAFailover(t *testing.T) {
	p := jw("ns", "w", ptr.To[int32](60), nil, func(s *deckhandbatchv1.JobPolicy) { s.MaxDeletionsPerMinute = ptr.To[int32](10) })
	w := p.watcher.(*deckhandbatchv1.JobWatcher)
	w.Generation, w.ResourceVersion = 1, "100"
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

	leader := newLedger()
	if got := admitted(leader, p, 10, t0.Add(300*time.Millisecond)); got != 10 {
		t.Fatalf("admitted %d of the first 10, want 10", got)
	}
	// The old leader's status, as its status controller writes it.
	s := summary{Breaker: leader.breakerState(w, 10, t0.Add(time.Second))}
	w.Status = computeStatus(w.Status, p, s, deletions{}, t0.Add(time.Second), t0.Add(time.Second))

	// Failovers within the minute: each new leader starts from the status.
	for i, at := range []time.Time{t0.Add(20 * time.Second), t0.Add(40 * time.Second)} {
		if got := admitted(newLedger(), p, 10, at); got != 0 {
			t.Errorf("leader %d admitted %d deletions within the minute the one before used up, want 0", i+2, got)
		}
	}
	// A minute after the newest deletion, the window is free again.
	if got := admitted(newLedger(), p, 10, t0.Add(61*time.Second+300*time.Millisecond)); got != 10 {
		t.Errorf("a minute later a new leader admitted %d of 10, want 10", got)
	}
}

// Only a newer view of the watcher acknowledges a trip: a reconcile that
// read the watcher before its resume token last changed (an older
// resourceVersion, another token) does not resume deletions.
func TestAnOlderResumeTokenAcknowledgesNothing(t *testing.T) {
	p := jw("ns", "w", ptr.To[int32](60), nil, func(s *deckhandbatchv1.JobPolicy) { s.MaxDeletionsPerMinute = ptr.To[int32](10) })
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	l := newLedger()
	current := p.watcher.(*deckhandbatchv1.JobWatcher)
	current.Generation, current.ResourceVersion = 1, "20"
	current.Annotations = map[string]string{deckhandbatchv1.ResumeDeletionsAnnotation: "monday"}
	if got := admitted(l, p, 11, t0); got != 10 {
		t.Fatalf("admitted %d of 11, want 10: the breaker trips", got)
	}
	stale := current.DeepCopy()
	stale.ResourceVersion = "15"
	stale.Annotations = nil // the token before the owner's "monday"
	if l.admit(compileJobWatcher(stale), "ns/late", t0.Add(time.Second)) {
		t.Fatal("a view of the watcher from before its resume token was set acknowledged the trip")
	}
	if l.admit(p, "ns/later", t0.Add(2*time.Second)) {
		t.Fatal("the breaker resumed without the owner")
	}
	// The owner's new token, in a newer view, does.
	ack := current.DeepCopy()
	ack.ResourceVersion = "30"
	ack.Annotations[deckhandbatchv1.ResumeDeletionsAnnotation] = "tuesday"
	if !l.admit(compileJobWatcher(ack), "ns/acknowledged", t0.Add(3*time.Second)) {
		t.Fatal("a new resume token did not acknowledge the trip")
	}
}
