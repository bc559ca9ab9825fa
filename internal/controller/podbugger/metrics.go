package podbugger

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/record"
)

// Results of an injection attempt, the result label of injections.
const (
	resultAdded   = "added"
	resultFailed  = "failed"
	resultSkipped = "skipped"
)

// injections counts attempts to add a PodBugger's container to a pod.
var injections = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "deckhand_podbugger_injections_total",
	Help: "Attempts to add a PodBugger's ephemeral container to a pod, by PodBugger and result (added, failed, skipped).",
}, metricLabels)

var metricLabels = []string{"namespace", "podbugger", "result"}

func init() {
	metrics.Registry.MustRegister(injections)
}

// forgetMetrics drops a deleted PodBugger's series, so that short-lived
// PodBuggers do not grow the registry without bound.
func forgetMetrics(key types.NamespacedName) {
	injections.DeletePartialMatch(prometheus.Labels{metricLabels[0]: key.Namespace, metricLabels[1]: key.Name})
	record.ForgetCounts(key)
}
