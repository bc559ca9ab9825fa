package jobwatcher

import (
	"errors"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
)

func TestCountDeleted(t *testing.T) {
	status := func(n int64, mark string) deckhandbatchv1.JobWatcherStatus {
		return deckhandbatchv1.JobWatcherStatus{DeletedJobs: n, CountedDeletions: mark}
	}
	tests := map[string]struct {
		old      deckhandbatchv1.JobWatcherStatus
		d        deletions
		wantN    int64
		wantMark string
	}{
		"nothing deleted, nothing written":       {status(0, ""), deletions{instance: "me", n: 0}, 0, ""},
		"first deletions":                        {status(0, ""), deletions{instance: "me", n: 2}, 2, "me/2"},
		"counted before this instance":           {status(7, "earlier/4"), deletions{instance: "me", n: 1}, 8, "me/1"},
		"no new deletions keeps an earlier mark": {status(7, "earlier/4"), deletions{instance: "me", n: 0}, 7, "earlier/4"},
		"only the uncounted ones are added":      {status(5, "me/3"), deletions{instance: "me", n: 4}, 6, "me/4"},
		// The write that counted them landed, its response was lost: the
		// status read back already counts them.
		"a lost write already counted them": {status(5, "me/4"), deletions{instance: "me", n: 4}, 5, "me/4"},
		"a malformed mark counts from zero": {status(5, "me"), deletions{instance: "me", n: 1}, 6, "me/1"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n, mark := countDeleted(tc.old, tc.d)
			if n != tc.wantN || mark != tc.wantMark {
				t.Errorf("countDeleted = %d, %q; want %d, %q", n, mark, tc.wantN, tc.wantMark)
			}
		})
	}
}

// The ledger's counts are per watcher UID; forget drops those of the name.
func TestLedgerForget(t *testing.T) {
	l := newLedger()
	a, b := jw("ns", "a", nil, nil).watcher, jw("ns", "b", nil, nil).watcher
	l.add(t.Context(), a, deletedJob{name: "ns/1"})
	l.add(t.Context(), a, deletedJob{name: "ns/2"})
	l.add(t.Context(), b, deletedJob{name: "ns/3"})
	if got, want := l.count(a, nil), (deletions{instance: l.instance, n: 2}); got.instance != want.instance || got.n != want.n || len(got.failures) != 0 {
		t.Fatalf("count = %+v, want %+v", got, want)
	}
	if got := l.tell(a.GetUID()); len(got) != 2 || got[0].name != "ns/1" || got[1].name != "ns/2" {
		t.Errorf("tell = %v, want ns/1 and ns/2", got)
	}
	if got := l.tell(a.GetUID()); len(got) != 0 {
		t.Errorf("told again: %v", got)
	}
	l.forget(types.NamespacedName{Namespace: "ns", Name: "a"})
	if got := l.count(a, nil).n; got != 0 {
		t.Errorf("forgotten watcher still counts %d", got)
	}
	if got := l.count(b, nil).n; got != 1 {
		t.Errorf("other watcher counts %d, want 1", got)
	}
}

// A deletion waiting for its failure record is not released as saved when
// its watcher goes: it was the gone watcher's to make.
func TestLedgerForgetFailsTheDeletionsItHadPending(t *testing.T) {
	l := newLedger()
	w := jw("ns", "a", nil, nil).watcher
	done := make(chan error, 1)
	go func() {
		done <- l.save(t.Context(), w, deckhandbatchv1.FailureRecord{Namespace: "ns", Job: "etl", UID: "etl-1"})
	}()
	<-l.notify // the record is in the tally
	l.forget(types.NamespacedName{Namespace: "ns", Name: "a"})
	if err := <-done; !errors.Is(err, errWatcherGone) {
		t.Errorf("save = %v, want %v", err, errWatcherGone)
	}
}

// Records seen in a watcher's status are kept: a status another writer
// put in its place without them gets them back.
func TestLedgerKeepsTheRecordsItSaw(t *testing.T) {
	l := newLedger()
	w := jw("ns", "a", nil, nil).watcher
	seen := []deckhandbatchv1.FailureRecord{{Namespace: "ns", Job: "etl", UID: "etl-1"}}
	if got := l.count(w, seen).failures; len(got) != 1 {
		t.Fatalf("failures = %v, want the one seen", got)
	}
	if got := l.count(w, nil).failures; len(got) != 1 || got[0].UID != "etl-1" {
		t.Errorf("after a status without it: failures = %v, want etl-1", got)
	}
}

// A watcher deleted and created again under its name, faster than its
// status controller saw it gone, leaves no tally behind: the ledger holds
// one per watcher that exists however often the name churns.
func TestLedgerHoldsOneTallyPerNameThroughChurn(t *testing.T) {
	l := newLedger()
	for i := range 100 {
		w := jw("ns", "w", nil, nil).watcher
		w.SetUID(types.UID(fmt.Sprintf("w-%d", i)))
		l.add(t.Context(), w, deletedJob{name: "ns/job"})
		<-l.notify
		l.count(w, nil)
	}
	if n := len(l.tallies); n != 1 {
		t.Fatalf("the ledger holds %d tallies after 100 watchers of one name, one at a time, want 1", n)
	}
}
