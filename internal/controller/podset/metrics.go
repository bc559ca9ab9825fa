package podset

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Pod churn per PodSet. A PodSet that keeps creating pods (crash-looping
// pods that end, an eviction storm) shows up here before anywhere else.
var (
	podsCreated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "deckhand_podset_pods_created_total",
		Help: "Pods a PodSet created.",
	}, metricLabels)
	podsDeleted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "deckhand_podset_pods_deleted_total",
		Help: "Pods a PodSet deleted (scale-down, rollout, finished pods).",
	}, metricLabels)
)

var metricLabels = []string{"namespace", "podset"}

func init() {
	metrics.Registry.MustRegister(podsCreated, podsDeleted)
}

// forgetMetrics drops a deleted PodSet's series, so that churn of short-lived
// PodSets does not grow the registry without bound.
func forgetMetrics(name types.NamespacedName) {
	labels := prometheus.Labels{metricLabels[0]: name.Namespace, metricLabels[1]: name.Name}
	podsCreated.DeletePartialMatch(labels)
	podsDeleted.DeletePartialMatch(labels)
}
