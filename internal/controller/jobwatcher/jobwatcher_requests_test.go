package jobwatcher_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// TestNoRequestsForJobsThatAreNotDue checks the controller's cost: with
// thousands of finished Jobs present, it sends the API server requests only
// for the Jobs that are due (here failed Jobs whose failure is recorded: one
// GET for the record, one DELETE each, and of the watchers past the cache
// only GETs of the one that governs them, no LIST), none for the others,
// neither when it starts nor when a watcher changes. It counts twice: the
// API server's own apiserver_request_total, and the controller's
// deckhand_jobwatcher_job_api_requests_total.
func TestNoRequestsForJobsThatAreNotDue(t *testing.T) {
	if testing.Short() {
		t.Skip("creates thousands of Jobs")
	}
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	total, due := 2000, 10
	if n, err := strconv.Atoi(os.Getenv("DECKHAND_TEST_JOBS")); err == nil {
		total = n
	}

	_, stop := env.StartManager(t, env.ManagerOptions())
	w := jobWatcher(ns, "w", i32(3600), i32(3600))
	env.Create(t, w)
	stop()

	// The Jobs exist before the manager starts, as after an upgrade.
	began := time.Now()
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range jobs {
				finishedAt, how := time.Now(), batchv1.JobComplete
				if i < due {
					finishedAt, how = finishedAt.Add(-2*time.Hour), batchv1.JobFailed
				}
				createJob(t, newJob(ns, fmt.Sprintf("job-%05d", i)), how, finishedAt)
			}
		})
	}
	for i := range total {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	t.Logf("created %d finished Jobs (%d due) in %s", total, due, time.Since(began).Round(time.Millisecond))

	before, ours, lists := apiserverJobRequests(t), controllerJobRequests(t), apiserverWatcherLists(t)
	opts := env.ManagerOptions()
	opts.WatchNamespaces = []string{ns} // other tests' Jobs are not counted
	started := time.Now()
	_, stop = env.StartManager(t, opts)
	defer stop()

	g.Eventually(status(w)).WithTimeout(2 * time.Minute).Should(And(
		HaveField("MatchedJobs", BeEquivalentTo(total-due)),
		HaveField("PendingDeletions", BeEquivalentTo(total-due)),
		HaveField("DeletedJobs", BeEquivalentTo(due))))
	t.Logf("manager started; %d due Jobs deleted and %d pending counted after %s", due, total-due, time.Since(started).Round(time.Millisecond))

	// A changed watcher re-judges every Job it reaches, from the cache.
	g.Expect(env.Update(w, func() { w.Spec.TTLSecondsAfterSucceeded = i32(7200) })).To(Succeed())
	g.Eventually(status(w)).WithTimeout(time.Minute).Should(HaveField("ObservedGeneration", w.Generation))
	// Whatever the controller would still send, it has had time to.
	time.Sleep(3 * time.Second)

	after, oursAfter := apiserverJobRequests(t), controllerJobRequests(t)
	delta := func(a, b map[string]float64) map[string]float64 {
		out := map[string]float64{}
		for k, v := range a {
			out[k] = v - b[k]
		}
		return out
	}
	seen, counted := delta(after, before), delta(oursAfter, ours)
	t.Logf("with %d finished Jobs (%d due): the API server saw GET %v, DELETE %v on jobs; the controller counted get %v, delete %v",
		total, due, seen["GET"], seen["DELETE"], counted["get"], counted["delete"])
	g.Expect(seen["GET"]).To(BeEquivalentTo(due), "GETs of single Jobs")
	g.Expect(seen["DELETE"]).To(BeEquivalentTo(due), "DELETEs of Jobs")
	g.Expect(counted).To(Equal(map[string]float64{"get": float64(due), "delete": float64(due)}))
	// The watchers come from the cache: the API server saw only the
	// informers' first LIST of each kind, none per deletion.
	g.Expect(apiserverWatcherLists(t)-lists).To(BeNumerically("<=", 2), "LISTs of watchers")
}

var requestLine = regexp.MustCompile(`^apiserver_request_total\{(.*)\} ([0-9.e+]+)$`)

// apiserverJobRequests sums the API server's apiserver_request_total for
// batch/v1 jobs (not their status), by verb.
func apiserverJobRequests(t *testing.T) map[string]float64 {
	t.Helper()
	return apiserverRequests(t, "batch", "jobs")
}

// apiserverWatcherLists sums the API server's LISTs of both watcher kinds.
func apiserverWatcherLists(t *testing.T) float64 {
	t.Helper()
	return apiserverRequests(t, "batch.deckhand.dev", "jobwatchers")["LIST"] +
		apiserverRequests(t, "batch.deckhand.dev", "clusterjobwatchers")["LIST"]
}

// apiserverRequests sums the API server's apiserver_request_total for one
// resource of group (not its subresources), by verb.
func apiserverRequests(t *testing.T, group, resource string) map[string]float64 {
	t.Helper()
	raw, err := kubernetes.NewForConfigOrDie(env.Config).CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("reading the API server's metrics: %v", err)
	}
	out := map[string]float64{}
	for line := range strings.SplitSeq(string(raw), "\n") {
		m := requestLine.FindStringSubmatch(line)
		if m == nil || !strings.Contains(m[1], `group="`+group+`"`) || !strings.Contains(m[1], `resource="`+resource+`"`) ||
			!strings.Contains(m[1], `subresource=""`) {
			continue
		}
		verb := regexp.MustCompile(`verb="([A-Z]+)"`).FindStringSubmatch(m[1])
		v, _ := strconv.ParseFloat(m[2], 64)
		out[verb[1]] += v
	}
	return out
}

// controllerJobRequests reads deckhand_jobwatcher_job_api_requests_total of
// Jobs by verb from this process's registry.
func controllerJobRequests(t *testing.T) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, verb := range []string{"get", "delete"} {
		v, err := testenv.Metric("deckhand_jobwatcher_job_api_requests_total", map[string]string{"resource": "jobs", "verb": verb})
		if err != nil {
			t.Fatal(err)
		}
		out[verb] = v
	}
	return out
}
