package debug

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
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
	Help: "Attempts to add a PodBugger's ephemeral container to a pod, by namespace and result (added, failed, skipped).",
}, []string{"namespace", "result"})

func init() {
	metrics.Registry.MustRegister(injections)
}
