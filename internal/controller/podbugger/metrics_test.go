package podbugger_test

import (
	"testing"

	. "github.com/onsi/gomega"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/podbuggertest"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

func TestMetricSeriesGoWithThePodBugger(t *testing.T) {
	g := testenv.NewG(t)
	ns, _, pb := debugWeb1(t, func(*debugv1beta1.PodBugger) {})

	series := func() (int, error) {
		return testenv.MetricSeries("deckhand_podbugger_injections_total", map[string]string{"namespace": ns, "podbugger": pb.Name})
	}
	g.Eventually(podbuggertest.Ephemeral(env, ns, "web-1")).Should(HaveLen(1))
	g.Expect(testenv.Metric("deckhand_podbugger_injections_total",
		map[string]string{"namespace": ns, "podbugger": pb.Name, "result": "added"})).To(BeEquivalentTo(1))

	g.Expect(env.Client.Delete(ctx, pb)).To(Succeed())
	g.Eventually(series).Should(BeZero())
}
