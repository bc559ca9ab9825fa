package jobwatcher_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/manager"
	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/internal/testenv/faultinject"
)

// TestStartProfile measures what the bench's backlog round measures in its
// manager's log (issue 26: a backlog of Jobs past their TTL when the
// manager starts), in envtest and with profiles of the manager: a fresh
// manager over N finished Jobs under one JobWatcher, N/10 of them past
// their TTL. It logs, from the manager's start, when the Jobs' list was
// received (its last page), when the JobWatcher's workers started (its
// first read of the watcher past the cache, which only a deletion makes),
// the first and the last deletion, the test process's CPU seconds (the
// manager runs in it; the apiserver and etcd are processes of their own)
// until the workers started and until the last deletion, and the bytes and
// objects it allocated per Job. It writes a CPU profile (cpu.pb.gz) and
// allocation profiles before and after (allocs-before.pb.gz,
// allocs-after.pb.gz) of the window into the directory given:
//
//	JOBWATCHER_START_PROFILE=/tmp/jwstart go test ./internal/controller/jobwatcher/ \
//	  -run TestStartProfile -count=1 -v -timeout 30m
//	go tool pprof -top /tmp/jwstart/cpu.pb.gz
//	go tool pprof -top -sample_index=alloc_space -base /tmp/jwstart/allocs-before.pb.gz /tmp/jwstart/allocs-after.pb.gz
//
// JOBWATCHER_START_JOBS sets N (10,000 by default). A measurement on a
// shared machine, not a check: it asserts nothing about the figures.
func TestStartProfile(t *testing.T) {
	dir := os.Getenv("JOBWATCHER_START_PROFILE")
	if dir == "" {
		t.Skip("a measurement: set JOBWATCHER_START_PROFILE to a directory for the profiles")
	}
	n := 10000
	if s := os.Getenv("JOBWATCHER_START_JOBS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 10 {
			t.Fatalf("JOBWATCHER_START_JOBS=%q: want a number of Jobs, at least 10", s)
		}
	}
	due := n / 10
	g := testenv.NewG(t)
	ctx := context.Background()
	g.Expect(os.MkdirAll(dir, 0o755)).To(Succeed())

	// The test's own client, unthrottled, to make the backlog quickly.
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.New(cfg, client.Options{Scheme: manager.Scheme})
	g.Expect(err).NotTo(HaveOccurred())

	ns := env.Namespace(t)
	_, stop := env.StartManager(t, env.ManagerOptions()) // its webhooks admit the watcher
	w := jobWatcher(ns, "backlog", i32(3600), nil)
	w.Spec.MaxDeletionsPerMinute = i32(100000) // the bench's backlog watcher: the breaker stays out of the drain
	env.Create(t, w)
	stop()
	t.Cleanup(func() {
		_ = c.Delete(ctx, w)
		_ = c.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(ns))
	})

	// N Jobs, finished while no manager ran: N/10 two hours ago (past the
	// TTL), the rest within the last minutes (due in an hour).
	made := time.Now()
	now, long := time.Now().Truncate(time.Second), time.Now().Add(-2*time.Hour)
	parallelJobs(t, n, func(i int) error {
		job := newJob(ns, fmt.Sprintf("job-%05d", i))
		if err := c.Create(ctx, job); err != nil {
			return err
		}
		at := now
		if i%10 == 0 {
			at = long
		}
		testenv.FinishJob(job, batchv1.JobComplete, at)
		return c.Status().Update(ctx, job)
	})
	t.Logf("made %d finished Jobs (%d due) in %s", n, due, time.Since(made).Round(time.Millisecond))

	// The manager, its requests timed.
	trace := &startTrace{ns: ns, watcher: w.Name}
	mgrCfg := rest.CopyConfig(env.Config)
	mgrCfg.Wrap(trace.wrap)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	g.Expect(writeProfile(filepath.Join(dir, "allocs-before.pb.gz"))).To(Succeed())
	cpuFile, err := os.Create(filepath.Join(dir, "cpu.pb.gz"))
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = cpuFile.Close() }()
	g.Expect(pprof.StartCPUProfile(cpuFile)).To(Succeed())
	profiling := true
	defer func() {
		if profiling {
			pprof.StopCPUProfile()
		}
	}()
	cpu0 := processCPU()
	trace.start(cpu0)
	_, stopManager := env.StartManagerWithConfig(t, mgrCfg, env.ManagerOptions())
	g.Eventually(trace.deleted).WithTimeout(10 * time.Minute).WithPolling(10 * time.Millisecond).Should(BeNumerically(">=", due))
	cpuEnd := processCPU()
	pprof.StopCPUProfile()
	profiling = false
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	g.Expect(writeProfile(filepath.Join(dir, "allocs-after.pb.gz"))).To(Succeed())
	stopManager()

	tr := trace.snapshot()
	since := func(at time.Time) string {
		if at.IsZero() {
			return "-"
		}
		return fmt.Sprintf("%.3f s", at.Sub(tr.started).Seconds())
	}
	t.Logf("%d Jobs, %d due; from the manager's start: Jobs listed (last of %d pages) %s, workers (first watcher read past the cache) %s, first deletion %s, last deletion (%d) %s",
		n, due, tr.pages, since(tr.listed), since(tr.firstWatcherGet), since(tr.firstDelete), tr.deletes, since(tr.lastDelete))
	t.Logf("test process CPU: %.2f s until the workers started, %.2f s until the last deletion",
		(tr.cpuAtWorkers - cpu0).Seconds(), (cpuEnd - cpu0).Seconds())
	t.Logf("allocated until the last deletion: %.1f MB, %d objects; %.0f bytes and %.0f objects per Job (%d Jobs listed)",
		float64(after.TotalAlloc-before.TotalAlloc)/1e6, after.Mallocs-before.Mallocs,
		float64(after.TotalAlloc-before.TotalAlloc)/float64(n), float64(after.Mallocs-before.Mallocs)/float64(n), n)
	t.Logf("profiles in %s: go tool pprof -top %s; go tool pprof -top -sample_index=alloc_space -base %s %s", dir,
		filepath.Join(dir, "cpu.pb.gz"), filepath.Join(dir, "allocs-before.pb.gz"), filepath.Join(dir, "allocs-after.pb.gz"))
}

// startTrace times the manager's requests that mark its start: the pages of
// its list of the namespace's Jobs, its reads of the watcher past the cache
// (the JobWatcher's workers run: only a deletion reads it so) and its
// deletions of Jobs.
type startTrace struct {
	ns, watcher string

	mu              sync.Mutex
	started         time.Time
	listed          time.Time
	pages           int
	firstWatcherGet time.Time
	cpuAtWorkers    time.Duration
	firstDelete     time.Time
	lastDelete      time.Time
	deletes         int
}

func (s *startTrace) start(cpu time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started, s.cpuAtWorkers = time.Now(), cpu
}

func (s *startTrace) deleted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deletes
}

func (s *startTrace) snapshot() startTrace {
	s.mu.Lock()
	defer s.mu.Unlock()
	return startTrace{started: s.started, listed: s.listed, pages: s.pages, firstWatcherGet: s.firstWatcherGet,
		cpuAtWorkers: s.cpuAtWorkers, firstDelete: s.firstDelete, lastDelete: s.lastDelete, deletes: s.deletes}
}

func (s *startTrace) wrap(rt http.RoundTripper) http.RoundTripper {
	jobs := "/apis/batch/v1/namespaces/" + s.ns + "/jobs"
	watcher := "/namespaces/" + s.ns + "/jobwatchers/" + s.watcher
	return faultinject.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err != nil || resp.StatusCode >= 300 {
			return resp, err
		}
		at, path := time.Now(), req.URL.Path
		s.mu.Lock()
		defer s.mu.Unlock()
		switch {
		case req.Method == http.MethodGet && path == jobs && req.URL.Query().Get("watch") == "":
			s.listed = at
			s.pages++
		case req.Method == http.MethodGet && strings.HasSuffix(path, watcher) && s.firstWatcherGet.IsZero():
			s.firstWatcherGet = at
			s.cpuAtWorkers = processCPU()
		case req.Method == http.MethodDelete && strings.HasPrefix(path, jobs+"/"):
			if s.firstDelete.IsZero() {
				s.firstDelete = at
			}
			s.lastDelete = at
			s.deletes++
		}
		return resp, err
	})
}

// processCPU is the CPU time (user and system) the test process spent so
// far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func writeProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// parallelJobs runs do for 0..n-1 on 16 goroutines, failing the test on
// the first error.
func parallelJobs(t *testing.T, n int, do func(i int) error) {
	t.Helper()
	work := make(chan int, n)
	for i := range n {
		work <- i
	}
	close(work)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range 16 {
		wg.Go(func() {
			for i := range work {
				if err := do(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		t.Fatalf("making the Jobs: %v", first)
	}
}
