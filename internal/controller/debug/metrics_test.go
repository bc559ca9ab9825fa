package debug_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/deckhand-dev/deckhand/internal/testenv"
)

func TestMetricSeriesGoWithThePodBugger(t *testing.T) {
	g := testenv.NewG(t)
	ns := enabledNamespace(t)
	env.StartManager(t, options())
	pod(t, ns, "web-1", web, true)
	pb := podBugger(ns, "web-debug", web)
	g.Expect(env.Client.Create(ctx, pb)).To(Succeed())

	series := func() (int, error) {
		return testenv.MetricSeries("deckhand_podbugger_injections_total", map[string]string{"namespace": ns, "podbugger": pb.Name})
	}
	g.Eventually(ephemeral(ns, "web-1")).Should(HaveLen(1))
	g.Expect(testenv.Metric("deckhand_podbugger_injections_total",
		map[string]string{"namespace": ns, "podbugger": pb.Name, "result": "added"})).To(BeEquivalentTo(1))

	g.Expect(env.Client.Delete(ctx, pb)).To(Succeed())
	g.Eventually(series).Should(BeZero())
}
