package modelbox

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// childWrites counts Deckhand's writes to each ModelBox's children by kind
// and outcome. A ModelBox whose "updated" count keeps growing is fighting
// someone over a field; "unchanged" counts applies the apiserver found to
// change nothing: wasted calls that a correct comparison avoids.
var childWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "deckhand_modelbox_child_writes_total",
	Help: "Writes the ModelBox controller made to a ModelBox's Deployment, Service, HorizontalPodAutoscaler and PodDisruptionBudget, by kind and outcome (created, updated, unchanged, deleted, handover).",
}, []string{"namespace", "modelbox", "kind", "outcome"})

// Outcomes of a write to a child, the outcome label of childWrites.
const (
	outcomeCreated   = "created"
	outcomeUpdated   = "updated"
	outcomeUnchanged = "unchanged"
	outcomeDeleted   = "deleted"
	outcomeHandover  = "handover"
)

func init() { metrics.Registry.MustRegister(childWrites) }

// countWrite counts one write to a child of the ModelBox key names.
func countWrite(key types.NamespacedName, kind, outcome string) {
	childWrites.WithLabelValues(key.Namespace, key.Name, kind, outcome).Inc()
}

// forgetMetrics drops a deleted ModelBox's series, so that short-lived
// ModelBoxes do not grow the registry without bound.
func forgetMetrics(key types.NamespacedName) {
	childWrites.DeletePartialMatch(prometheus.Labels{"namespace": key.Namespace, "modelbox": key.Name})
}
