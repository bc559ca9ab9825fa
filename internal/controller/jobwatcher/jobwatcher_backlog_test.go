package jobwatcher_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// slowDeletes delays every DELETE whose path contains part by d: an
// apiserver slow to delete one namespace's Jobs, so that a backlog there
// takes seconds to drain.
type slowDeletes struct {
	next http.RoundTripper
	part string
	d    time.Duration
}

func (s slowDeletes) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodDelete && strings.Contains(req.URL.Path, s.part) {
		time.Sleep(s.d)
	}
	return s.next.RoundTrip(req)
}

// A manager started on a cluster with history drains a backlog of due Jobs
// (the initial list, queued at low priority); a Job of another watcher that
// falls due meanwhile is deleted within about a second, not after the
// backlog: one in the initial list that fell due just before the start (a
// restart's gap), one in the initial list not due yet (it finished just
// before the start), and one created after the start.
func TestADueJobDoesNotWaitForAnotherWatchersBacklog(t *testing.T) {
	const backlog, ttl = 400, 4
	g := testenv.NewG(t)
	ctx := context.Background()
	// Two watchers of one namespace, so that the initial list, in name
	// order, queues the backlog (a-…) before the other watcher's Jobs (z-…).
	ns := env.Namespace(t)
	_, stop := env.StartManager(t, env.ManagerOptions()) // its webhooks admit the watchers
	history, fast := jobWatcher(ns, "history", i32(60), nil), jobWatcher(ns, "fast", i32(ttl), nil)
	history.Spec.JobNamePatterns, fast.Spec.JobNamePatterns = []string{"a-old-.*"}, []string{"z-.*"}
	env.Create(t, history)
	env.Create(t, fast)
	stop()

	// The backlog: finished an hour ago, while no manager ran.
	long := time.Now().Add(-time.Hour)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < backlog; i += 8 {
				createJob(t, newJob(ns, fmt.Sprintf("a-old-%d", i)), batchv1.JobComplete, long)
			}
		})
	}
	wg.Wait()
	// Finished just before the start: in the initial list, due ttl seconds
	// later, in the middle of the drain; and one that fell due just before
	// the start (a restart's gap), due as the manager starts.
	finishedAt := time.Now().Truncate(time.Second)
	listed := createJob(t, newJob(ns, "z-listed"), batchv1.JobComplete, finishedAt)
	gap := createJob(t, newJob(ns, "z-gap"), batchv1.JobComplete, finishedAt.Add(-ttl*time.Second))

	left := func() int {
		var jobs batchv1.JobList
		g.Expect(env.Client.List(ctx, &jobs, client.InNamespace(ns))).To(Succeed())
		n := 0
		for _, j := range jobs.Items {
			if strings.HasPrefix(j.Name, "a-old-") && j.DeletionTimestamp.IsZero() {
				n++
			}
		}
		return n
	}
	// Each deletion of the backlog takes 100 ms at the apiserver: 4 workers
	// drain it in 10 s or more.
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return slowDeletes{next: rt, part: "/namespaces/" + ns + "/jobs/a-old-", d: 100 * time.Millisecond}
	})
	env.StartManagerWithConfig(t, cfg, env.ManagerOptions())
	// Due at the start: deleted among the first, not after the backlog.
	g.Eventually(env.Exists(gap)).WithPolling(50 * time.Millisecond).Should(BeFalse())
	t.Logf("Job z-gap deleted, %d of the backlog of %d left", left(), backlog)
	g.Expect(left()).To(BeNumerically(">", backlog/2), "z-gap waited for the backlog")
	// Created once the manager runs: not in its initial list.
	lateAt := time.Now().Truncate(time.Second)
	late := createJob(t, newJob(ns, "z-late"), batchv1.JobComplete, lateAt)

	for _, c := range []struct {
		job *batchv1.Job
		due time.Time
	}{{listed, finishedAt.Add(ttl * time.Second)}, {late, lateAt.Add(ttl * time.Second)}} {
		g.Eventually(env.Exists(c.job)).WithPolling(50 * time.Millisecond).Should(BeFalse())
		lag, remaining := time.Since(c.due), left()
		t.Logf("Job %s deleted %.2fs after it fell due, %d of the backlog of %d left", c.job.Name, lag.Seconds(), remaining, backlog)
		g.Expect(lag).To(BeNumerically("<", 2*time.Second), "%s waited for the backlog", c.job.Name)
		g.Expect(remaining).To(BeNumerically(">", 0), "the backlog drained before %s fell due: the test proves nothing", c.job.Name)
	}
	g.Eventually(left).WithTimeout(2 * time.Minute).Should(BeZero())
}

// A new watcher over a namespace with history (the usual backlog at
// install) queues its Jobs past their TTL behind the Jobs other watchers
// see finish meanwhile: one that finishes during the drain is deleted about
// as soon as it falls due.
func TestANewWatchersBacklogDoesNotHoldAnotherWatchersJobs(t *testing.T) {
	const backlog, ttl = 400, 2
	g := testenv.NewG(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	// Each deletion of the backlog takes 100 ms at the apiserver: 4 workers
	// drain it in 10 s or more.
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return slowDeletes{next: rt, part: "/namespaces/" + ns + "/jobs/a-old-", d: 100 * time.Millisecond}
	})
	env.StartManagerWithConfig(t, cfg, env.ManagerOptions())
	fast := jobWatcher(ns, "fast", i32(ttl), nil)
	fast.Spec.JobNamePatterns = []string{"z-.*"}
	env.Create(t, fast)
	// The controller runs (its start, the initial list, is over): a due
	// Job of the fast watcher goes.
	probe := createJob(t, newJob(ns, "z-probe"), batchv1.JobComplete, time.Now().Add(-time.Hour))
	g.Eventually(env.Exists(probe)).Should(BeFalse())

	// History no watcher governs yet: finished an hour ago.
	long := time.Now().Add(-time.Hour)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < backlog; i += 8 {
				createJob(t, newJob(ns, fmt.Sprintf("a-old-%d", i)), batchv1.JobComplete, long)
			}
		})
	}
	wg.Wait()
	left := func() int {
		var jobs batchv1.JobList
		g.Expect(env.Client.List(ctx, &jobs, client.InNamespace(ns))).To(Succeed())
		n := 0
		for _, j := range jobs.Items {
			if strings.HasPrefix(j.Name, "a-old-") && j.DeletionTimestamp.IsZero() {
				n++
			}
		}
		return n
	}
	g.Expect(left()).To(Equal(backlog))

	history := jobWatcher(ns, "history", i32(60), nil)
	history.Spec.JobNamePatterns = []string{"a-old-.*"}
	history.Spec.MaxDeletionsPerMinute = i32(10000)
	env.Create(t, history)
	g.Eventually(left).Should(BeNumerically("<", backlog))
	// Finished during the drain.
	finishedAt := time.Now().Truncate(time.Second)
	job := createJob(t, newJob(ns, "z-new"), batchv1.JobComplete, finishedAt)
	g.Eventually(env.Exists(job)).WithPolling(50 * time.Millisecond).Should(BeFalse())
	lag, remaining := time.Since(finishedAt.Add(ttl*time.Second)), left()
	t.Logf("Job z-new deleted %.2fs after it fell due, %d of the backlog of %d left", lag.Seconds(), remaining, backlog)
	g.Expect(lag).To(BeNumerically("<", 2*time.Second), "z-new waited for the new watcher's backlog")
	g.Expect(remaining).To(BeNumerically(">", 0), "the backlog drained before z-new fell due: the test proves nothing")
	g.Eventually(left).WithTimeout(2 * time.Minute).Should(BeZero())
}
