//go:build bench

package bench

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// The scale family's shared helpers: a manager of the row's own, its
// memory, and the slope of memory against N.

// memorySample is what a manager holds: its heap in use (the Go runtime's
// go_memstats_heap_inuse_bytes, from its /metrics: spans in use, live
// objects and the free room between them), its live heap
// (go_memstats_heap_alloc_bytes right after a collection) and its anonymous
// resident memory (RssAnon, from /proc), in bytes. kept and peak say where
// RssAnon above the heap comes from: kept is the heap the Go runtime holds
// from the OS (go_memstats_heap_sys_bytes less go_memstats_heap_released_bytes:
// spans in use and free spans not returned yet), peak the process's highest
// resident memory since it started (VmHWM, file-backed pages included). When
// kept is near RssAnon and far above heap in use, RssAnon is the room the
// heap grew into at its peak, not what the objects hold.
type memorySample struct{ heap, live, anon, kept, peak float64 }

// scaleMemorySettle is how long a manager runs before its memory is read.
const scaleMemorySettle = 20 * time.Second

// sampleMemory reads m's memory after scaleMemorySettle, so that the
// caches' initial lists are behind it. The heap is read right after a
// garbage collection, which the heap profile it takes first runs (gc=1):
// a manager that lists N objects at start leaves the garbage of decoding
// them until the next collection, and heap in use read before it measures
// that garbage, not what each object costs. The profile is kept beside the
// run's figures (bin/bench/heap-<what>.pb.gz) for `go tool pprof`.
func (b *bench) sampleMemory(m *managerProcess, what string) memorySample {
	b.t.Helper()
	time.Sleep(scaleMemorySettle)
	b.must(b.saveHeapProfile(m, what))
	anon, err := procStatusMiB(m.p.Pid(), "RssAnon")
	b.must(err)
	peak, err := procStatusMiB(m.p.Pid(), "VmHWM")
	b.must(err)
	metrics := b.mustScrape(m)
	return memorySample{heap: metrics.sum("go_memstats_heap_inuse_bytes", nil), live: metrics.sum("go_memstats_heap_alloc_bytes", nil), anon: anon * (1 << 20),
		kept: metrics.sum("go_memstats_heap_sys_bytes", nil) - metrics.sum("go_memstats_heap_released_bytes", nil), peak: peak * (1 << 20)}
}

func (b *bench) saveHeapProfile(m *managerProcess, what string) error {
	return saveProfile(m, "heap?gc=1", "heap-"+what+".pb.gz")
}

// saveProfile keeps the manager's profile at query (of /debug/pprof/) as
// bin/bench/name.
func saveProfile(m *managerProcess, query, name string) error {
	resp, err := http.Get(m.pprofURL + query)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return errors.Join(err, fmt.Errorf("profile %s: %s", query, resp.Status))
	}
	return keepBenchFile(name, body)
}

// keepBenchFile writes body to bin/bench/name, beside the run's figures.
func keepBenchFile(name string, body []byte) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	dir := filepath.Join(root, "bin", "bench")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), body, 0o644)
}

// slope is the least-squares slope of y against x.
func slope(x, y []float64) float64 {
	if len(x) < 2 {
		return 0
	}
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx /= float64(len(x))
	my /= float64(len(y))
	var num, den float64
	for i := range x {
		num += (x[i] - mx) * (y[i] - my)
		den += (x[i] - mx) * (x[i] - mx)
	}
	if den == 0 {
		return 0
	}
	return num / den
}

// memoryFigures adds, for one scale row, the heap and RssAnon at each N
// and their slopes per object (bytes an object costs), judged against
// target bytes per object. baseline is the manager's memory with none of
// the row's objects; at[i] is its memory with sizes[i] of them.
func (b *bench) memoryFigures(row string, sizes []int, baseline memorySample, at []memorySample, target float64) {
	figures := []struct {
		metric, slope string
		of            func(memorySample) float64
		judged        bool
	}{
		{"heap in use", "heap per object (slope over N = 0 and every size)", func(m memorySample) float64 { return m.heap }, true},
		// What the objects themselves keep alive: the figure to profile.
		{"live heap after a collection", "live heap per object (slope)", func(m memorySample) float64 { return m.live }, false},
		{"anonymous resident memory (RssAnon)", "RssAnon per object (slope over N = 0 and every size)", func(m memorySample) float64 { return m.anon }, true},
		// Where RssAnon above the heap comes from (memorySample).
		{"heap kept from the OS (HeapSys - HeapReleased)", "heap kept from the OS per object (slope)", func(m memorySample) float64 { return m.kept }, false},
		{"peak resident memory since start (VmHWM)", "peak resident memory per object (slope)", func(m memorySample) float64 { return m.peak }, false},
	}
	x := append(make([]float64, 0, 1+len(sizes)), 0)
	for _, n := range sizes {
		x = append(x, float64(n))
	}
	for _, fig := range figures {
		y := append(make([]float64, 0, 1+len(sizes)), fig.of(baseline))
		for i, n := range sizes {
			y = append(y, fig.of(at[i]))
			b.rep.add(&figure{Row: row, Metric: fig.metric, Unit: "MiB", N: n}, []float64{fig.of(at[i]) / (1 << 20)}, nil)
		}
		if len(sizes) == 0 {
			continue
		}
		f := b.rep.add(&figure{Row: row, Metric: fig.slope, Unit: "B", N: slices.Max(sizes)}, []float64{slope(x, y)}, nil)
		if fig.judged {
			f.judge(fmt.Sprintf("≤ %.0f B", target), f.Deckhand <= target)
		}
	}
}

// watchedNamespaces makes k namespaces in which Deckhand acts on pods and
// Jobs (a JobWatcher and a PodBugger each, nothing for them to do), so that
// the scoped cache holds more namespaces than scopedcache.ClusterWideAbove:
// the memory row's gate then also covers a cache that went cluster-wide.
// The objects are checked by webhooks, so a manager runs while they are
// made.
func (b *bench) watchedNamespaces(k int) {
	b.t.Helper()
	m := b.startManager()
	defer m.p.Stop()
	for range k {
		ns := b.namespace("bench-watched", map[string]string{debugv1beta1.NamespaceEnabledLabel: "true"})
		b.must(b.c.Client.Create(b.ctx, &deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "watched"},
			Spec: deckhandbatchv1.JobWatcherSpec{JobPolicy: deckhandbatchv1.JobPolicy{TTLSecondsAfterSucceeded: ptr.To[int32](3600)}}}))
		b.must(b.c.Client.Create(b.ctx, &debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "watched"},
			Spec: debugv1beta1.PodBuggerSpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "debug-me"}},
				Image: "docker.io/library/busybox:1.37"}}))
	}
}
