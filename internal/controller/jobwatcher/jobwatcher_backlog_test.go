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
// backlog. The Job that falls due was itself in the initial list (it
// finished just before the start, its TTL not yet over), and so was the
// Job created after the start.
func TestADueJobDoesNotWaitForAnotherWatchersBacklog(t *testing.T) {
	const backlog, ttl = 400, 4
	g := testenv.NewG(t)
	ctx := context.Background()
	backlogNS, otherNS := env.Namespace(t), env.Namespace(t)
	_, stop := env.StartManager(t, env.ManagerOptions()) // its webhooks admit the watchers
	env.Create(t, jobWatcher(backlogNS, "history", i32(60), nil))
	env.Create(t, jobWatcher(otherNS, "fast", i32(ttl), nil))
	stop()

	// The backlog: finished an hour ago, while no manager ran.
	long := time.Now().Add(-time.Hour)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < backlog; i += 8 {
				createJob(t, newJob(backlogNS, fmt.Sprintf("old-%d", i)), batchv1.JobComplete, long)
			}
		})
	}
	wg.Wait()
	// Finished just before the start: in the initial list, due ttl seconds
	// later, in the middle of the drain.
	finishedAt := time.Now().Truncate(time.Second)
	listed := createJob(t, newJob(otherNS, "listed"), batchv1.JobComplete, finishedAt)

	// Each deletion of the backlog takes 100 ms at the apiserver: 4 workers
	// drain it in 10 s or more.
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return slowDeletes{next: rt, part: "/namespaces/" + backlogNS + "/jobs/", d: 100 * time.Millisecond}
	})
	env.StartManagerWithConfig(t, cfg, env.ManagerOptions())
	// Created once the manager runs: not in its initial list.
	lateAt := time.Now().Truncate(time.Second)
	late := createJob(t, newJob(otherNS, "late"), batchv1.JobComplete, lateAt)

	left := func() int {
		var jobs batchv1.JobList
		g.Expect(env.Client.List(ctx, &jobs, client.InNamespace(backlogNS))).To(Succeed())
		n := 0
		for _, j := range jobs.Items {
			if j.DeletionTimestamp.IsZero() {
				n++
			}
		}
		return n
	}
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
