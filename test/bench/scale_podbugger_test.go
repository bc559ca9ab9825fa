//go:build bench

package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
)

func init() { scaleRows["scale-podbugger"] = (*bench).scalePodBuggerRow }

// scalePodBuggerFreed is how many covered pods the lag phase replaces.
const scalePodBuggerFreed = 10

// scalePodBuggerRow: a PodBugger over N matching pods (kwok, placed on the
// nodes round robin) at every N of BENCH_SIZES. maxPods is at most 1,000,
// so the PodBugger covers min(N, 1000) of them:
//   - the time until it has, and the manager's API calls per injection;
//   - the lag: 10 covered pods deleted and 10 matching pods created, as a
//     rollout would, until the PodBugger covers maxPods again;
//   - heap and RssAnon of a manager started fresh with the N pods cached,
//     and their slope per pod.
func (b *bench) scalePodBuggerRow() {
	sizes := slices.Sorted(slices.Values(b.s.sizes))
	m := b.startManager()
	baseline := b.sampleMemory(m, "podbugger-0")
	mem := make([]memorySample, 0, len(sizes))
	row := "scale: PodBugger over N matching pods, maxPods min(N, 1000)"
	for _, n := range sizes {
		started := time.Now()
		cover := min(n, 1000)
		ns := b.namespace("scale-podbugger", map[string]string{debugv1beta1.NamespaceEnabledLabel: "true"})
		tr := b.trackPods(ns, cover)
		b.createPods(ns, "target", n, benchLabels, false)
		b.waitRunning(ns, n)
		fmt.Printf("bench: scale-podbugger N=%d: pods Running in %s\n", n, time.Since(started).Round(time.Second))
		b.mustScrape(m) // the scrape's reviews cached before counting
		before := b.mustScrape(m).sum("rest_client_requests_total", nil)
		tr.begin()
		b.must(b.c.Client.Create(b.ctx, &debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "debugger"},
			Spec: debugv1beta1.PodBuggerSpec{Selector: metav1.LabelSelector{MatchLabels: benchLabels},
				Image: "docker.io/library/busybox:1.37", MaxPods: int32(cover)}}))
		b.waitFor(tr, "scale-podbugger cover", func(tr *podTracker) bool { return tr.allInjected > 0 })
		tr.mu.Lock()
		covered := tr.allInjected.Seconds()
		tr.mu.Unlock()
		calls := (b.mustScrape(m).sum("rest_client_requests_total", nil) - before) / float64(cover)

		// The lag: covered pods replaced.
		tr.mu.Lock()
		var freed []string
		for uid := range tr.injected {
			freed = append(freed, string(uid))
			if len(freed) == scalePodBuggerFreed {
				break
			}
		}
		tr.mu.Unlock()
		b.must(b.deletePodsByUID(ns, freed))
		start := time.Now()
		b.createPods(ns, "replacement", scalePodBuggerFreed, benchLabels, false)
		err := wait.PollUntilContextTimeout(b.ctx, 50*time.Millisecond, 10*time.Minute, true, func(context.Context) (bool, error) {
			tr.mu.Lock()
			defer tr.mu.Unlock()
			gone := 0
			for _, uid := range freed {
				if !tr.seen[types.UID(uid)] || !tr.alive[types.UID(uid)] {
					gone++
				}
			}
			return gone == len(freed) && len(tr.injected) >= cover, nil
		})
		if err != nil {
			b.t.Fatalf("scale-podbugger: the PodBugger does not cover %d pods again after 10 minutes", cover)
		}
		recovered := time.Since(start).Seconds()
		close(tr.stop)

		// Memory of a manager started fresh with the N pods cached.
		m.p.Stop()
		m = b.startManager()
		mem = append(mem, b.sampleMemory(m, fmt.Sprintf("podbugger-%d", n)))
		b.rep.add(&figure{Row: row, Metric: "min(N, 1000) pods covered, from the PodBugger's creation", Unit: "s", N: n}, []float64{covered}, nil)
		b.rep.add(&figure{Row: row, Metric: "manager API calls per injection", Unit: "calls", N: n}, []float64{calls}, nil)
		// From the deletion: the replacements are created, placed and
		// Running (kwok) before they can be covered.
		b.rep.add(&figure{Row: row, Metric: fmt.Sprintf("%d covered pods replaced: maxPods covered again", scalePodBuggerFreed), Unit: "s", N: n}, []float64{recovered}, nil)
		b.dropNamespace(ns)
		fmt.Printf("bench: scale-podbugger N=%d: done in %s\n", n, time.Since(started).Round(time.Second))
	}
	m.p.Stop()
	b.memoryFigures("scale: PodBugger manager memory, N matching pods cached", sizes, baseline, mem, 1024)
}

// deletePodsByUID deletes the pods of ns with the given UIDs, at once.
func (b *bench) deletePodsByUID(ns string, uids []string) error {
	list, err := b.c.Clientset.CoreV1().Pods(ns).List(b.ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return err
	}
	zero := int64(0)
	for _, p := range list.Items {
		if slices.Contains(uids, string(p.UID)) {
			if err := b.c.Clientset.CoreV1().Pods(ns).Delete(b.ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
				return err
			}
		}
	}
	return nil
}
