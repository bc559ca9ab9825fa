package record

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// incidents counts the failures PodBuggers recorded, a new PodIncident or a
// repeat counted in one, by PodBugger and reason.
var incidents = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "deckhand_podbugger_incidents_total",
	Help: "Pod failures recorded by a PodBugger (a new PodIncident or a repeat counted in one), by PodBugger and reason (Error, OOMKilled, CrashLoopBackOff, NotReady, Evicted).",
}, incidentLabels)

var incidentLabels = []string{"namespace", "podbugger", "reason"}

func init() {
	metrics.Registry.MustRegister(incidents)
}

// Count counts a failure the PodBugger namespace/podBugger recorded, for
// reason.
func Count(namespace, podBugger, reason string) {
	incidents.WithLabelValues(namespace, podBugger, reason).Inc()
}

// ForgetCounts drops the series of a deleted PodBugger, so that
// short-lived PodBuggers do not grow the registry without bound.
func ForgetCounts(key types.NamespacedName) {
	incidents.DeletePartialMatch(prometheus.Labels{incidentLabels[0]: key.Namespace, incidentLabels[1]: key.Name})
}
