package jobwatcher

import (
	"strconv"
	"strings"
	"sync"
)

// historyMemo keeps, per namespace, the history computed from the cache
// (historyOf over every Job of the namespace), for as long as neither the
// namespace's Jobs nor the watchers with history limits changed. Without
// it every judgement of a Job under a history limit listed its whole
// namespace, and so did every Job event (jobEvents, historyPass): a start over N
// Jobs cost N² copies, minutes of CPU at 10,000. The history is a hint to
// what to judge; a deletion for a history limit is decided on a list read
// past the cache (freshHistory), so a memo a moment behind the cache
// deletes nothing it should not.
//
// A Job beyond a limit that goes does not make the memo stale: a Job going
// can only bring another of its group back within a limit, never push one
// beyond it, so the memo still names every Job beyond a limit (and perhaps
// one that no longer is, which the list past the cache keeps). Draining a
// backlog of N Jobs beyond a limit thus computes the history once, not once
// per deletion (N passes over N Jobs). Any other Job that goes makes it
// stale, so that a namespace whose Jobs all went is not held.
//
// It holds a namespace only while it has a history memoized or being
// computed: a change of the namespace's Jobs drops what it held, so the memo
// is bounded by the namespaces whose history was asked for since their last
// change, not by every namespace that ever had a Job.
type historyMemo struct {
	mu   sync.Mutex
	byNS map[string]*namespaceHistory
}

// namespaceHistory is what the memo holds of one namespace: how many times
// its Jobs changed while a history was being computed (version), how many
// computations are under way, and the history computed with the watchers
// that watchers fingerprints (nil: none).
type namespaceHistory struct {
	version  uint64
	inflight int
	watchers string
	h        history
	// beyond names the Jobs h puts beyond a limit.
	beyond map[string]bool
}

func newHistoryMemo() *historyMemo {
	return &historyMemo{byNS: map[string]*namespaceHistory{}}
}

// changed notes that the cache's Jobs of namespace ns changed: the history
// memoized for it is stale. A Job's event is told after the cache holds it,
// so a history computed after changed returns sees the change.
func (m *historyMemo) changed(ns string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.byNS[ns]
	if e == nil {
		return
	}
	e.version++
	e.h, e.beyond = nil, nil
	if e.inflight == 0 {
		delete(m.byNS, ns)
	}
}

// gone notes that the Job named name of namespace ns is gone (or going):
// the history memoized for ns stays when it put the Job beyond a limit,
// else it is stale.
func (m *historyMemo) gone(ns, name string) {
	m.mu.Lock()
	e := m.byNS[ns]
	keep := e != nil && e.h != nil && e.beyond[name]
	m.mu.Unlock()
	if !keep {
		m.changed(ns)
	}
}

// get returns the history of ns computed by compute, from the memo when
// nothing changed since it was computed.
func (m *historyMemo) get(ns string, watchers []*compiledWatcher, compute func() (history, error)) (history, error) {
	fp := historyWatchers(watchers)
	m.mu.Lock()
	e := m.byNS[ns]
	if e == nil {
		e = &namespaceHistory{}
		m.byNS[ns] = e
	}
	if h := e.h; h != nil && e.watchers == fp {
		m.mu.Unlock()
		return h, nil
	}
	version := e.version
	e.inflight++
	m.mu.Unlock()
	h, err := compute()
	m.mu.Lock()
	defer m.mu.Unlock()
	e.inflight--
	if err == nil && e.version == version {
		e.h, e.watchers, e.beyond = h, fp, make(map[string]bool, len(h))
		for k := range h {
			e.beyond[k.job.Name] = true
		}
	}
	if e.h == nil && e.inflight == 0 && m.byNS[ns] == e {
		delete(m.byNS, ns)
	}
	return h, err
}

// size is how many namespaces the memo holds.
func (m *historyMemo) size() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byNS)
}

// historyWatchers identifies watchers with history limits as a history
// depends on them: each one's UID and generation (its spec).
func historyWatchers(watchers []*compiledWatcher) string {
	var b strings.Builder
	for _, w := range watchers {
		if w.hasHistoryLimits() {
			b.WriteString(string(w.watcher.GetUID()))
			b.WriteByte('/')
			b.WriteString(strconv.FormatInt(w.watcher.GetGeneration(), 10))
			b.WriteByte(' ')
		}
	}
	return b.String()
}
