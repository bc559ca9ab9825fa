package jobwatcher

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// historyLists shares the lists past the cache that deletions for a history
// limit rest on, under the rule watcherReads keeps for reads of a watcher: a
// deletion rests on a list of its namespace that started after its Job was
// judged due. Listing the namespace for each such Job made a backlog of N
// Jobs N lists of N Jobs each, whole objects, by every worker at once: 2,210
// lists of a namespace for 1,954 deletions, and the manager's heap at 748
// MB, on a namespace of 2,000 finished Jobs.
//
// A Job judged beyond a history limit is not held by its worker while its
// namespace is listed: it joins the namespace's next list (which starts at
// once unless one is under way, else when that one ends) and is judged again
// a moment later (historyRecheck), when the answer is there. A backlog thus
// costs a few lists of its namespace, not one per Job: the first list
// answers the Jobs judged before it started, the next one all those judged
// meanwhile. A list reads the namespace in pages of historyPage whole Jobs
// and keeps, of each page, what the history needs (historyFrom: a name and a
// finish time per Job under a limit) and, of the Jobs waiting for it, what
// the cache keeps of a Job (cachedJob, under 1 KiB), uid and resourceVersion
// for the DELETE's preconditions included: one page of whole Jobs at a time,
// not a namespace per worker.
//
// A list runs under a context of its own (its caller's values, not its
// deadline or cancellation): one reconcile's end must not fail the Jobs that
// wait for the same list. The zero value is ready.
type historyLists struct {
	mu   sync.Mutex
	byNS map[string]*namespaceLists
}

// namespaceLists is the lists of one namespace: the one under way, the next
// (not started), and which list each waiting Job joined (by name).
type namespaceLists struct {
	running, next *historyList
	joined        map[string]*historyList
}

// historyList is one list of a namespace past the cache. waiting (name →
// UID) is fixed once it starts; ended is closed once fresh, h, fp and err
// hold its answer.
type historyList struct {
	waiting map[string]types.UID
	ended   chan struct{}
	endedAt time.Time
	// fresh holds the waiting Jobs as listed (absent: gone), until each takes
	// its answer.
	fresh map[string]*cachedJob
	// h is the history of the namespace's Jobs as listed, judged with the
	// watchers fp fingerprints (historyWatchers).
	h   history
	fp  string
	err error
}

// historyPage is how many Jobs a page of a history list holds.
const historyPage = 500

// historyRecheck is when a Job waiting for a list of its namespace is
// judged again to take its answer.
const historyRecheck = time.Second

// historyListTimeout bounds one list of a namespace (every page).
const historyListTimeout = time.Minute

// historyAnswerTTL is how long an answer waits for a Job that joined its
// list: one that has not come back by then (gone, or judged otherwise
// since) joins another list when it does.
const historyAnswerTTL = time.Minute

// historyAnswer is what a list tells one Job: the Job as listed (nil: gone)
// and the history of its namespace, judged with the watchers fp
// fingerprints.
type historyAnswer struct {
	fresh *batchv1.Job
	h     history
	fp    string
}

// listFunc lists namespace ns past the cache: the Jobs of want (name → UID)
// as listed, and the history with its watchers' fingerprint.
type listFunc func(ctx context.Context, ns string, want map[string]types.UID) (map[string]*cachedJob, history, string, error)

// take returns the answer of the list job joined, once it has ended
// (ok true); else job joins the namespace's next list, started at once when
// none is under way, and take returns ok false: ask again later
// (historyRecheck).
func (l *historyLists) take(ctx context.Context, job *batchv1.Job, list listFunc) (answer historyAnswer, ok bool, err error) {
	ns, name := job.Namespace, job.Name
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byNS == nil {
		l.byNS = map[string]*namespaceLists{}
	}
	s := l.byNS[ns]
	if s == nil {
		s = &namespaceLists{joined: map[string]*historyList{}}
		l.byNS[ns] = s
	}
	if hl := s.joined[name]; hl != nil && hl.waiting[name] == job.UID {
		select {
		case <-hl.ended:
			delete(s.joined, name)
			fresh := hl.fresh[name]
			delete(hl.fresh, name)
			if len(s.joined) == 0 && s.running == nil && s.next == nil {
				l.drop(ns, s)
			}
			if time.Since(hl.endedAt) < historyAnswerTTL {
				if hl.err != nil {
					return historyAnswer{}, true, hl.err
				}
				answer = historyAnswer{h: hl.h, fp: hl.fp}
				if fresh != nil {
					answer.fresh = fresh.job()
				}
				return answer, true, nil
			}
			// Too old to be taken: judged again on a new list.
			if l.byNS[ns] == nil {
				l.byNS[ns] = s
			}
		default:
			return historyAnswer{}, false, nil
		}
	}
	if s.next == nil {
		s.next = &historyList{waiting: map[string]types.UID{}, ended: make(chan struct{})}
	}
	s.next.waiting[name] = job.UID
	s.joined[name] = s.next
	if s.running == nil {
		l.start(ctx, ns, s, list)
	}
	return historyAnswer{}, false, nil
}

// start runs the namespace's next list. The caller holds l.mu.
func (l *historyLists) start(ctx context.Context, ns string, s *namespaceLists, list listFunc) {
	hl := s.next
	s.running, s.next = hl, nil
	// Not the caller's deadline or cancellation: the list answers every Job
	// that joined it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), historyListTimeout)
	go func() {
		defer cancel()
		fresh, h, fp, err := list(ctx, ns, hl.waiting)
		l.mu.Lock()
		defer l.mu.Unlock()
		hl.fresh, hl.h, hl.fp, hl.err, hl.endedAt = fresh, h, fp, err, time.Now()
		close(hl.ended)
		s.running = nil
		switch {
		case s.next != nil:
			l.start(ctx, ns, s, list)
		case len(s.joined) == 0:
			l.drop(ns, s)
		}
		// The answers nobody came back for (a Job gone meanwhile) are
		// dropped once they are too old to be taken.
		time.AfterFunc(historyAnswerTTL, func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			maps.DeleteFunc(s.joined, func(_ string, j *historyList) bool { return j == hl })
			if len(s.joined) == 0 && s.running == nil && s.next == nil {
				l.drop(ns, s)
			}
		})
	}()
}

// drop forgets the lists of namespace ns, s, unless another took their
// place. The caller holds l.mu.
func (l *historyLists) drop(ns string, s *namespaceLists) {
	if l.byNS[ns] == s {
		delete(l.byNS, ns)
	}
}

// listHistory lists the Jobs of namespace ns past the cache, in pages of
// historyPage, and returns the Jobs of want (name → UID) as listed, slim, and
// which Jobs are beyond the history limits of the namespace's watchers (as
// the cache shows them when the list starts), with those watchers'
// fingerprint.
func (r *JobReconciler) listHistory(ctx context.Context, ns string, want map[string]types.UID) (map[string]*cachedJob, history, string, error) {
	watchers, err := listWatchers(ctx, r.Client, ns, r.protection, r.specs)
	if err != nil {
		return nil, nil, "", err
	}
	fresh := make(map[string]*cachedJob, len(want))
	pages := func(fn func(*batchv1.Job) error) error {
		cont := ""
		for {
			var page batchv1.JobList
			jobAPIRequests.WithLabelValues(resourceJobs, "list").Inc()
			if err := r.APIReader.List(ctx, &page, client.InNamespace(ns), client.Limit(historyPage), client.Continue(cont)); err != nil {
				return fmt.Errorf("listing Jobs past the cache: %w", err)
			}
			for i := range page.Items {
				job := &page.Items[i]
				if uid, ok := want[job.Name]; ok && uid == job.UID {
					slim, _ := slimJob(job)
					if c, ok := slim.(*cachedJob); ok {
						fresh[job.Name] = c
					}
				}
				if err := fn(job); err != nil {
					return err
				}
			}
			if cont = page.Continue; cont == "" {
				return nil
			}
		}
	}
	if !anyHistoryLimits(watchers) {
		// No limit any more: nothing is beyond one, and the Jobs that
		// waited are judged again (their watchers differ).
		return fresh, history{}, historyWatchers(watchers), nil
	}
	h, err := historyFrom(watchers, pages)
	if err != nil {
		return nil, nil, "", err
	}
	return fresh, h, historyWatchers(watchers), nil
}
