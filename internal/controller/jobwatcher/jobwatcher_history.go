package jobwatcher

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
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

// enqueueHistoryPeers queues, for the event of a finished Job, the finished
// Jobs of its namespace that are now beyond a watcher's history limit, so
// that a newer Job pushes older ones out at once. It reads only the cache,
// and lists the namespace's Jobs only when a watcher in reach has a history
// limit. The caller has told the memo of the event (jobEvents): the history
// counts this Job.
func (r *JobReconciler) enqueueHistoryPeers(ctx context.Context, obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	ns := obj.GetNamespace()
	watchers, err := r.watchers.get(ctx, ns)
	var h history
	if err == nil {
		h, err = r.historyIn(ctx, ns, watchers)
	}
	if err != nil {
		logf.FromContext(ctx).Error(err, "finding Jobs beyond a history limit", "job", klog.KObj(obj))
		return
	}
	seen := map[types.NamespacedName]bool{}
	for k := range h {
		if !seen[k.job] {
			seen[k.job] = true
			q.Add(reconcile.Request{NamespacedName: k.job})
		}
	}
}
