package manager

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/deckhand-dev/deckhand/internal/version"
)

// buildInfo is 1, labelled with the release and the Go it was built with,
// so that a dashboard or an alert can tell which release runs where (and a
// rollout's progress: two versions at once).
var buildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "deckhand_build_info",
	Help: "Always 1: the release of the running manager (version) and the Go it was built with (goversion).",
}, []string{"version", "goversion"})

func init() {
	metrics.Registry.MustRegister(buildInfo)
	buildInfo.WithLabelValues(version.Version, runtime.Version()).Set(1)
}
