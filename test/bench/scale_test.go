//go:build bench

package bench

import (
	"fmt"
	"slices"
	"time"
)

// The scale family's shared helpers: a manager of the row's own, its
// memory, and the slope of memory against N.

// memorySample is what a manager holds: its heap in use (the Go runtime's
// go_memstats_heap_inuse_bytes, from its /metrics) and its anonymous
// resident memory (RssAnon, from /proc), in bytes.
type memorySample struct{ heap, anon float64 }

// scaleMemorySettle is how long a manager runs before its memory is read.
const scaleMemorySettle = 20 * time.Second

// sampleMemory reads m's memory after scaleMemorySettle, so that the
// caches' initial lists are behind it.
func (b *bench) sampleMemory(m *managerProcess) memorySample {
	b.t.Helper()
	time.Sleep(scaleMemorySettle)
	anon, err := procStatusMiB(m.p.Pid(), "RssAnon")
	b.must(err)
	return memorySample{heap: b.mustScrape(m).sum("go_memstats_heap_inuse_bytes", nil), anon: anon * (1 << 20)}
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
	x, heap, anon := make([]float64, 1, 1+len(sizes)), make([]float64, 1, 1+len(sizes)), make([]float64, 1, 1+len(sizes))
	heap[0], anon[0] = baseline.heap, baseline.anon
	for i, n := range sizes {
		x, heap, anon = append(x, float64(n)), append(heap, at[i].heap), append(anon, at[i].anon)
		b.rep.add(&figure{Row: row, Metric: "heap in use", Unit: "MiB", N: n}, []float64{at[i].heap / (1 << 20)}, nil)
		b.rep.add(&figure{Row: row, Metric: "anonymous resident memory (RssAnon)", Unit: "MiB", N: n}, []float64{at[i].anon / (1 << 20)}, nil)
	}
	if len(sizes) == 0 {
		return
	}
	top := slices.Max(sizes)
	what := fmt.Sprintf("%.0f B", target)
	f := b.rep.add(&figure{Row: row, Metric: "heap per object (slope over N = 0 and every size)", Unit: "B", N: top}, []float64{slope(x, heap)}, nil)
	f.judge("≤ "+what, f.Deckhand <= target)
	f = b.rep.add(&figure{Row: row, Metric: "RssAnon per object (slope over N = 0 and every size)", Unit: "B", N: top}, []float64{slope(x, anon)}, nil)
	f.judge("≤ "+what, f.Deckhand <= target)
}
