//go:build bench

package bench

import (
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// go test -tags bench -skip '^TestBench$' ./test/bench runs these without a
// cluster (make test-unit does).

func TestSlope(t *testing.T) {
	// 20 MiB at rest and 1,500 bytes an object, with noise either way.
	x := []float64{0, 1000, 10000, 100000}
	y := []float64{20 << 20, 20<<20 + 1.5e6 + 3e5, 20<<20 + 1.5e7 - 3e5, 20<<20 + 1.5e8}
	if got := slope(x, y); math.Abs(got-1500) > 10 {
		t.Errorf("slope = %g bytes an object, want about 1500", got)
	}
	if got := slope([]float64{0}, []float64{5}); got != 0 {
		t.Errorf("slope of one point = %g, want 0", got)
	}
}

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("1000, 10000,100000")
	if err != nil || !slices.Equal(got, []int{1000, 10000, 100000}) {
		t.Errorf("parseSizes = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "-5", "1e3", "2000000", "1000,,10"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("parseSizes(%q) took it", bad)
		}
	}
}

// A phase's CPU is told by process: a busy loop in this process shows as
// its core-seconds and within the machine's busy cores, and a process not
// there when the mark was taken counts from its start.
func TestCPUUseTellsWhoWasBusy(t *testing.T) {
	b := &bench{t: t}
	procs := map[string]int{"bench": os.Getpid()}
	mark := b.markCPU(procs)
	// Busy until the kernel has counted 0.3 core-s of this process (on a
	// loaded machine that takes longer than 300 ms of wall time), or 20 s.
	start, _ := cpuSeconds(os.Getpid())
	for until := time.Now().Add(20 * time.Second); time.Now().Before(until); {
		if now, _ := cpuSeconds(os.Getpid()); now-start >= 0.3 {
			break
		}
		for spin := time.Now().Add(10 * time.Millisecond); time.Now().Before(spin); {
		}
	}
	u := b.cpuSince(mark, procs)
	elapsed := time.Since(mark.at).Seconds()
	if u.secs["bench"] < 0.25 {
		t.Errorf("a busy loop of 0.3 core-s of this process was told as %.2f core-s", u.secs["bench"])
	}
	// One USER_HZ tick of slack for each of the two counters.
	if busy := u.busyCores * elapsed; busy < u.secs["bench"]-0.02 {
		t.Errorf("the machine was busy %.2f core-s, less than this process's %.2f", busy, u.secs["bench"])
	}
	if !strings.Contains(u.String(), "bench ") || !strings.Contains(u.String(), "cores busy") {
		t.Errorf("String() = %q names neither the process nor the cores", u)
	}
	// A process of that name that is another one now (restarted): all of
	// its CPU counts, none of the one the mark saw is taken off.
	// (Marked after the loop, so that the mark's own figure is not small.)
	other := os.Getppid()
	restarted := b.cpuSince(b.markCPU(procs), map[string]int{"bench": other})
	total, err := cpuSeconds(other)
	if err != nil {
		t.Fatal(err)
	}
	if got := restarted.secs["bench"]; math.Abs(got-total) > 0.02 {
		t.Errorf("a process restarted since the mark counted %.2f core-s, want all of its %.2f", got, total)
	}
}

func TestCurrentBoundGrowsWithTheSets(t *testing.T) {
	for sets, want := range map[int]time.Duration{1000: 30 * time.Minute, 3000: 30 * time.Minute, 5000: 50 * time.Minute, 10000: 100 * time.Minute} {
		if got := currentBound(sets); got != want {
			t.Errorf("currentBound(%d) = %s, want %s", sets, got, want)
		}
	}
}

// The workqueue's buckets are a factor of ten wide: a p99 that lies between
// 100 and 1,000 s is estimated at 820 s, and the bucket says how little that
// estimate holds.
func TestQuantileSaysItsBucket(t *testing.T) {
	bucket := func(le string, n float64) sample {
		return sample{name: "wait_bucket", labels: map[string]string{"le": le}, value: n}
	}
	after := metrics{bucket("10", 50), bucket("100", 95), bucket("1000", 100), bucket("+Inf", 100)}
	for _, c := range []struct {
		q, estimate, lo, hi float64
	}{{0.5, 10, 0, 10}, {0.99, 820, 100, 1000}} {
		estimate, lo, hi := quantile(nil, after, "wait", nil, c.q)
		if math.Abs(estimate-c.estimate) > 1e-9 || lo != c.lo || hi != c.hi {
			t.Errorf("quantile %g = %g in (%g, %g], want %g in (%g, %g]", c.q, estimate, lo, hi, c.estimate, c.lo, c.hi)
		}
	}
	if got, want := quantileText(nil, after, "wait", nil, 0.99), "820 s (bucket 100–1000 s)"; got != want {
		t.Errorf("quantileText = %q, want %q", got, want)
	}
}

// Each injected pod's records are judged by the class of its own kind, a
// rollout's pods and any other by none: a name prefix never matches
// another kind's (childoom is not oom).
func TestClassOfInjectedPods(t *testing.T) {
	for _, k := range injectedFailures {
		if got := classOf(k.prefix + "-1"); got != k.class {
			t.Errorf("%s-1: class %q, want %q", k.prefix, got, k.class)
		}
	}
	if got := classOf("web-1"); got != "" {
		t.Errorf("a pod the row did not make: class %q", got)
	}
}
