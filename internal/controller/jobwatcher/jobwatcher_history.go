package jobwatcher

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
)

// history holds, per watcher, the finished Jobs beyond its history limits.
type history map[historyKey]bool

type historyKey struct {
	watcher types.UID
	job     types.NamespacedName
}

// beyond reports whether job is beyond p's history limit for its outcome.
func (h history) beyond(p *compiledWatcher, job *batchv1.Job) bool {
	return h[historyKey{p.watcher.GetUID(), types.NamespacedName{Namespace: job.Namespace, Name: job.Name}}]
}

// historyLimit is p's history limit for outcome o; false when it has none.
func (p *compiledWatcher) historyLimit(o outcome) (int, bool) {
	l := p.spec.SuccessfulJobsHistoryLimit
	if o == outcomeFailed {
		l = p.spec.FailedJobsHistoryLimit
	}
	if l == nil {
		return 0, false
	}
	return int(*l), true
}

func (p *compiledWatcher) hasHistoryLimits() bool {
	return p.spec.SuccessfulJobsHistoryLimit != nil || p.spec.FailedJobsHistoryLimit != nil
}

// historyGroup is the group job counts in for p's history limits.
func (p *compiledWatcher) historyGroup(job *batchv1.Job, o outcome) string {
	group := string(o) + "/" + job.Namespace
	if p.spec.HistoryGroupBy == deckhandbatchv1.HistoryByNamePrefix {
		prefix, _, _ := cutLast(job.Name, "-")
		group += "/" + prefix
	}
	return group
}

// cutLast is strings.Cut at the last sep.
func cutLast(s, sep string) (string, string, bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

// historyOf finds, for every policy with a history limit, the finished Jobs
// it matches beyond its limit: in each of its groups, the Jobs of one
// outcome after the newest N by finish time (ties by name). Jobs being
// deleted or without a finish time do not count.
func historyOf(watchers []*compiledWatcher, jobs []batchv1.Job) history {
	h, _ := historyFrom(watchers, jobsOf(jobs)) // a list hands out no error
	return h
}

// historyFrom is historyOf over the Jobs jobs hands out. It keeps a name
// and a time per Job in a limited group, not the Jobs.
func historyFrom(watchers []*compiledWatcher, jobs jobSource) (history, error) {
	type finishedJob struct {
		job types.NamespacedName
		at  time.Time
	}
	type group struct {
		watcher *compiledWatcher
		name    string
	}
	groups := map[group][]finishedJob{}
	limits := map[group]int{}
	limited := slices.DeleteFunc(slices.Clone(watchers), func(p *compiledWatcher) bool { return !p.hasHistoryLimits() })
	if len(limited) == 0 {
		return history{}, nil
	}
	err := jobs(func(job *batchv1.Job) error {
		o, at, ok := finished(job)
		if !ok || at.IsZero() || !job.DeletionTimestamp.IsZero() {
			return nil
		}
		for _, p := range limited {
			limit, ok := p.historyLimit(o)
			if !ok || !p.matches(job) {
				continue
			}
			g := group{p, p.historyGroup(job, o)}
			groups[g] = append(groups[g], finishedJob{types.NamespacedName{Namespace: job.Namespace, Name: job.Name}, at})
			limits[g] = limit
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	h := history{}
	for g, js := range groups {
		slices.SortFunc(js, func(a, b finishedJob) int {
			return cmp.Or(b.at.Compare(a.at), cmp.Compare(a.job.Name, b.job.Name))
		})
		for _, j := range js[min(limits[g], len(js)):] {
			h[historyKey{g.watcher.watcher.GetUID(), j.job}] = true
		}
	}
	return h, nil
}

// anyHistoryLimits reports whether one of watchers has a history limit.
func anyHistoryLimits(watchers []*compiledWatcher) bool {
	return slices.ContainsFunc(watchers, (*compiledWatcher).hasHistoryLimits)
}

// historyPass is the request for a pass over the Jobs of namespace ns that
// queues those a Job event pushed beyond a history limit (passHistory). No
// Job is named "", so Reconcile tells it from a Job's request.
//
// A pass computes the namespace's history over all its Jobs. It used to run
// in the handler of each event: a burst of N Job events of one namespace (a
// relist, a fleet of CronJobs firing together) cost N passes over N Jobs in
// the cache's delivery path, while every other Job delivery waited. As a
// request it is coalesced by the workqueue: the events of a burst queue one
// pass, and those that come in while it runs queue one more, so a burst
// costs a pass or two, run by the controller's workers under the
// controller's context (a goroutine started from the handler with the
// handler's context found it cancelled: every pass failed).
func historyPass(ns string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns}}
}

// isHistoryPass reports whether req is a historyPass.
func isHistoryPass(req reconcile.Request) bool { return req.Name == "" }

// jobQueue is the controller's queue, as the handler of Job events was given
// it: a pass queues the Jobs it finds into it.
type jobQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
}

// queueHistoryPass queues a pass of namespace ns, and keeps q (the
// controller's one queue) for the pass to queue Jobs into.
func (r *JobReconciler) queueHistoryPass(ns string, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if r.queue.Load() == nil {
		r.queue.CompareAndSwap(nil, &jobQueue{q})
	}
	q.Add(historyPass(ns))
}

// passHistory queues the finished Jobs of namespace ns that are beyond a
// watcher's history limit, so that a newer Job pushes older ones out at once.
// It reads only the cache, and lists the namespace's Jobs only when a watcher
// in reach has a history limit and the memo holds no history of the Jobs as
// they are: the events that queued the pass told the memo first (jobEvents),
// so the history counts their Jobs.
func (r *JobReconciler) passHistory(ctx context.Context, ns string) error {
	q := r.queue.Load()
	if q == nil {
		return nil
	}
	watchers, err := r.watchers.get(ctx, ns)
	var h history
	if err == nil {
		h, err = r.historyIn(ctx, ns, watchers)
	}
	if err != nil {
		return fmt.Errorf("finding the Jobs of namespace %s beyond a history limit: %w", ns, err)
	}
	seen := map[types.NamespacedName]bool{}
	for k := range h {
		if !seen[k.job] {
			seen[k.job] = true
			q.Add(reconcile.Request{NamespacedName: k.job})
		}
	}
	return nil
}
