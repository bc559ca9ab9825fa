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
// namespace, and so did every Job event (jobEvents, enqueueHistoryPeers): a start over N
// Jobs cost N² copies, minutes of CPU at 10,000. The history is a hint to
// what to judge; a deletion for a history limit is decided on a list read
// past the cache (freshHistory), so a memo a moment behind the cache
// deletes nothing it should not.
type historyMemo struct {
	mu sync.Mutex
	// versions counts the Job events of each namespace.
	versions map[string]uint64
	byNS     map[string]memoizedHistory
}

// memoizedHistory is a namespace's history, computed at version of its Jobs
// with the watchers that watchers fingerprints.
type memoizedHistory struct {
	version  uint64
	watchers string
	h        history
}

func newHistoryMemo() *historyMemo {
	return &historyMemo{versions: map[string]uint64{}, byNS: map[string]memoizedHistory{}}
}

// changed notes that the cache's Jobs of namespace ns changed: the history
// memoized for it is stale. A Job's event is told after the cache holds it,
// so a history computed after changed returns sees the change.
func (m *historyMemo) changed(ns string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.versions[ns]++
	delete(m.byNS, ns)
}

// get returns the history of ns computed by compute, from the memo when
// nothing changed since it was computed.
func (m *historyMemo) get(ns string, watchers []*compiledWatcher, compute func() (history, error)) (history, error) {
	fp := historyWatchers(watchers)
	m.mu.Lock()
	version := m.versions[ns]
	if got, ok := m.byNS[ns]; ok && got.version == version && got.watchers == fp {
		m.mu.Unlock()
		return got.h, nil
	}
	m.mu.Unlock()
	h, err := compute()
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.versions[ns] == version {
		m.byNS[ns] = memoizedHistory{version: version, watchers: fp, h: h}
	}
	return h, nil
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
