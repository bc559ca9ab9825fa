package jobwatcher_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/internal/testenv/proc"
)

// namespaceJobLists counts the LISTs of one namespace's Jobs a manager sends (not its
// watches): calls (first pages) and pages.
type namespaceJobLists struct {
	next         http.RoundTripper
	path         string
	calls, pages atomic.Int64
}

func (c *namespaceJobLists) RoundTrip(req *http.Request) (*http.Response, error) {
	q := req.URL.Query()
	if req.Method == http.MethodGet && req.URL.Path == c.path && q.Get("watch") != "true" {
		c.pages.Add(1)
		if q.Get("continue") == "" {
			c.calls.Add(1)
		}
	}
	return c.next.RoundTrip(req)
}

// A history backlog (a watcher with successfulJobsHistoryLimit 10 over a
// namespace of N finished Jobs of about 3 KB, as after an install) is
// deleted on a few lists of the namespace past the cache, not one per Job:
// the Jobs judged beyond the limit while a list is under way share the next
// one, and a list is read in pages. Each list of N Jobs per Job made the cost
// grow with N² and every worker hold a whole namespace of decoded Jobs at
// once.
//
// N is 1,000 (DECKHAND_TEST_HISTORY_JOBS sets it): enough that one LIST per
// Job (about a thousand) and a bounded number (a handful) are far apart, and
// that eight workers each holding a list of the whole namespace (8 × 1,000 ×
// 3 KB, decoded several times larger) stand out from one page at a time;
// small enough that creating the Jobs and draining them takes well under a
// minute on a loaded two-core machine.
func TestAHistoryBacklogListsTheNamespaceAFewTimes(t *testing.T) {
	if testing.Short() {
		t.Skip("creates a thousand Jobs")
	}
	g := testenv.NewG(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	n, limit := 1000, 10
	if v, err := strconv.Atoi(os.Getenv("DECKHAND_TEST_HISTORY_JOBS")); err == nil {
		n = v
	}
	_, stop := env.StartManager(t, env.ManagerOptions()) // its webhook admits the watcher
	w := jobWatcher(ns, "w", i32(86400), nil)
	w.Spec.SuccessfulJobsHistoryLimit = i32(int32(limit))
	w.Spec.MaxDeletionsPerMinute = i32(100000)
	env.Create(t, w)
	stop()

	// The history: finished Jobs of about 3 KB each, from before the start.
	pad := strings.Repeat("x", 2500)
	finished := time.Now().Add(-time.Hour)
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range jobs {
				job := newJob(ns, fmt.Sprintf("report-%05d", i))
				job.Annotations = map[string]string{"example.com/notes": pad}
				createJob(t, job, batchv1.JobComplete, finished.Add(time.Duration(i)*time.Second))
			}
		})
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()

	lists := &namespaceJobLists{path: "/apis/batch/v1/namespaces/" + ns + "/jobs"}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { lists.next = rt; return lists })
	opts := env.ManagerOptions()
	opts.WatchNamespaces = []string{ns}
	left := func() (int, error) {
		var l batchv1.JobList
		err := env.Client.List(ctx, &l, client.InNamespace(ns))
		return len(l.Items), err
	}
	// Timed and sampled on the controller's own count of its DELETEs:
	// polling the namespace's Jobs would put the test's own lists of
	// whole Jobs in the heap it measures.
	deletes := func() float64 {
		v, err := testenv.Metric("deckhand_jobwatcher_job_api_requests_total", map[string]string{"resource": "jobs", "verb": "delete"})
		g.Expect(err).NotTo(HaveOccurred())
		return v
	}
	deletesBefore := deletes()
	before := proc.HeapPeak()()
	peak := proc.HeapPeak()
	started := time.Now()
	_, stop = env.StartManagerWithConfig(t, cfg, opts)
	defer stop()
	g.Eventually(func() float64 { return deletes() - deletesBefore }).WithTimeout(3*time.Minute).WithPolling(100*time.Millisecond).
		Should(BeNumerically(">=", n-limit), "DELETEs sent")
	drained := time.Since(started)
	heap := peak()
	g.Eventually(left).Should(Equal(limit), "Jobs left")

	// One of the LISTs is the cache's own (its informer's initial list).
	t.Logf("%d finished Jobs, history limit %d: drained in %s with %d LISTs of the namespace (%d pages); live heap %d MiB before, peak %d MiB",
		n, limit, drained.Round(time.Millisecond), lists.calls.Load(), lists.pages.Load(), before>>20, heap>>20)
	g.Expect(lists.calls.Load()).To(BeNumerically("<=", 8), "LISTs of the namespace for %d Jobs", n)
	g.Expect(lists.pages.Load()).To(BeNumerically("<=", 8*(n/500+1)), "pages of LISTs of the namespace")
	g.Expect(heap-min(heap, before)).To(BeNumerically("<", 64<<20), "live heap grown by the drain")
}
