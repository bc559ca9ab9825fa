package jobwatcher

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/scopedcache"
)

// jobSource hands Jobs to fn one at a time and stops at fn's first error.
//
// The passes over a namespace's Jobs (a watcher's reach, its status, the
// history limits) read them through one: listed first, a namespace of
// 100,000 Jobs was 100,000 Jobs expanded from the cache's compact form at
// once, twice at a start, and the manager's RSS reached 841 MiB for a live
// heap of 130 MiB (docs/dev-log/performance.md, the scale rows at 100,000).
type jobSource func(fn func(*batchv1.Job) error) error

// jobsIn is the Jobs of namespace ns: handed out one at a time by cache
// (the manager's, scopedcache.Each) or, without one (a test's reconciler),
// listed once through c for every pass.
func jobsIn(ctx context.Context, cache, c client.Reader, ns string) jobSource {
	if cache == nil {
		var list batchv1.JobList
		var err error
		listed := false
		return func(fn func(*batchv1.Job) error) error {
			if !listed {
				err, listed = c.List(ctx, &list, client.InNamespace(ns)), true
			}
			if err != nil {
				return err
			}
			return jobsOf(list.Items)(fn)
		}
	}
	return func(fn func(*batchv1.Job) error) error {
		return scopedcache.Each(ctx, cache, &batchv1.JobList{}, func(o client.Object) error {
			job, ok := o.(*batchv1.Job)
			if !ok {
				return fmt.Errorf("a %T among the Jobs of namespace %s", o, ns)
			}
			return fn(job)
		}, client.InNamespace(ns))
	}
}

// jobsOf hands out the Jobs of a list.
func jobsOf(jobs []batchv1.Job) jobSource {
	return func(fn func(*batchv1.Job) error) error {
		for i := range jobs {
			if err := fn(&jobs[i]); err != nil {
				return err
			}
		}
		return nil
	}
}
