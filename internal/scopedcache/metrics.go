package scopedcache

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// informers counts, per scoped kind, the informers that hold it: one per
// namespace (scope="namespace") or one for all (scope="cluster").
var informers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "deckhand_scoped_cache_informers",
	Help: "Informers the manager runs for a kind it caches only where a controller needs it (pods, Jobs): scope=namespace counts the namespaces with their own informer, scope=cluster is 1 while one informer holds the kind in every namespace.",
}, []string{"kind", "scope"})

func init() {
	metrics.Registry.MustRegister(informers)
}

// gaugeNamespaces sets the informer counts of kind from its spaces.
func gaugeNamespaces(kind string, spaces map[string]*space) {
	cluster := 0.0
	if _, ok := spaces[allNamespaces]; ok {
		cluster = 1
	}
	informers.WithLabelValues(kind, "namespace").Set(float64(len(spaces)) - cluster)
	informers.WithLabelValues(kind, "cluster").Set(cluster)
}
