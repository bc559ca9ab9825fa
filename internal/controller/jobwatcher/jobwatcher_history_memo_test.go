package jobwatcher

import (
	"errors"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
)

// The memo computes a namespace's history again exactly when what it
// depends on changed: a Job of the namespace (changed), or a watcher with
// a history limit (another one, or another generation of its spec); a
// history computed while a change came in is not kept.
func TestHistoryMemoIsComputedAgainOnlyAfterAChange(t *testing.T) {
	w := &deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w", UID: "w-1", Generation: 1}}
	w.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](3)
	watchers := []*compiledWatcher{compileJobWatcher(w)}
	m := newHistoryMemo()
	computed := 0
	var failing error // what the cache answers
	compute := func() (history, error) {
		computed++
		if failing != nil {
			return nil, failing
		}
		return history{historyKey{"w-1", types.NamespacedName{Namespace: "ns", Name: "old"}}: true}, nil
	}
	get := func(ns string, ws []*compiledWatcher) {
		t.Helper()
		h, err := m.get(ns, ws, compute)
		if err != nil || len(h) != 1 {
			t.Fatalf("get(%s) = %v, %v", ns, h, err)
		}
	}
	steps := []struct {
		what   string
		before func()
		ns     string
		want   int
	}{
		{"first judgement", nil, "ns", 1},
		{"nothing changed", nil, "ns", 1},
		{"a Job of another namespace changed", func() { m.changed("other") }, "ns", 1},
		{"a Job of the namespace changed", func() { m.changed("ns") }, "ns", 2},
		{"nothing changed since", nil, "ns", 2},
		{"the watcher's spec changed", func() {
			w2 := w.DeepCopy()
			w2.Generation = 2
			watchers = []*compiledWatcher{compileJobWatcher(w2)}
		}, "ns", 3},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		get(s.ns, watchers)
		if computed != s.want {
			t.Fatalf("%s: computed %d times, want %d", s.what, computed, s.want)
		}
	}

	// A change while the history is computed: the result is used once,
	// not kept.
	m.changed("ns")
	_, _ = m.get("ns", watchers, func() (history, error) {
		computed++
		m.changed("ns")
		return history{}, nil
	})
	get("ns", watchers)
	if computed != 5 {
		t.Fatalf("a history computed across a change was kept: computed %d times, want 5", computed)
	}
	// An error is not kept either.
	m.changed("ns")
	failing = errors.New("cache not synced")
	if _, err := m.get("ns", watchers, compute); err == nil {
		t.Fatal("the error was not returned")
	}
	failing = nil
	get("ns", watchers)
	if computed != 7 {
		t.Fatalf("after an error: computed %d times, want 7", computed)
	}
}

// The memo holds a namespace only while its history is memoized: tenants
// that come, have their history judged and go (their Jobs deleted) leave
// nothing behind.
func TestHistoryMemoStaysFlatThroughNamespaceChurn(t *testing.T) {
	w := &deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w", UID: "w-1", Generation: 1}}
	w.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](3)
	watchers := []*compiledWatcher{compileJobWatcher(w)}
	m := newHistoryMemo()
	for i := range 1000 {
		ns := fmt.Sprintf("tenant-%d", i)
		if _, err := m.get(ns, watchers, func() (history, error) { return history{}, nil }); err != nil {
			t.Fatal(err)
		}
		m.changed(ns) // its last Job deleted
	}
	if n := m.size(); n != 0 {
		t.Fatalf("the memo holds %d namespaces after 1,000 came and went, want 0", n)
	}
}

// Draining a backlog beyond a history limit does not compute the history
// again for every Job deleted: a Job beyond the limit that goes leaves the
// memo as it is (it can push no other Job beyond the limit); any other Job
// that goes makes it stale, and a namespace whose Jobs all went is dropped.
func TestHistoryMemoKeepsItsHistoryWhileJobsBeyondTheLimitGo(t *testing.T) {
	w := &deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w", UID: "w-1", Generation: 1}}
	w.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](1)
	watchers := []*compiledWatcher{compileJobWatcher(w)}
	m := newHistoryMemo()
	computed := 0
	compute := func() (history, error) {
		computed++
		h := history{}
		for i := range 100 {
			h[historyKey{"w-1", types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("old-%d", i)}}] = true
		}
		return h, nil
	}
	for i := range 100 {
		if _, err := m.get("ns", watchers, compute); err != nil {
			t.Fatal(err)
		}
		m.gone("ns", fmt.Sprintf("old-%d", i))
	}
	if computed != 1 {
		t.Fatalf("deleting 100 Jobs beyond the limit computed the history %d times, want 1", computed)
	}
	m.gone("ns", "newest") // the Job within the limit
	if n := m.size(); n != 0 {
		t.Fatalf("the memo holds %d namespaces after their last Job went, want 0", n)
	}
}
