package jobwatcher

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Results of acting on a due Job, the result label of jobsDeleted.
const (
	resultDeleted     = "deleted"
	resultWouldDelete = "would_delete"
	resultError       = "error"
	// resultHeld: the watcher's deletion circuit breaker held the Job.
	resultHeld = "held"
)

// watcherLabels name the watcher a series is about: its kind, namespace
// (empty for a ClusterJobWatcher) and name.
var watcherLabels = []string{"watcher_kind", "watcher_namespace", "watcher"}

var (
	jobsDeleted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "deckhand_jobwatcher_jobs_deleted_total",
		Help: "Due Jobs acted on, by governing watcher (kind, namespace, name), the Job's outcome (Succeeded, Failed) and the result (deleted, would_delete in dry run, error, held by the deletion circuit breaker).",
	}, slices.Concat(watcherLabels, []string{"outcome", "result"}))

	deletionLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "deckhand_jobwatcher_deletion_lag_seconds",
		Help:    "Time from a Job's expiry (finish time + TTL) to its deletion.",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300},
	})

	// expiredJobs is what the JobWatcherExpiredJobsPiling alert watches:
	// an active watcher deletes an expired Job within moments, so Jobs that
	// stay expired mean its deletions fail or it cannot keep up.
	expiredJobs = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "deckhand_jobwatcher_expired_jobs",
		Help: "Finished Jobs a watcher governs that are past their TTL (or history limit) and not yet deleted, by watcher (kind, namespace, name); suspended and dry-run watchers count none.",
	}, watcherLabels)

	jobAPIRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "deckhand_jobwatcher_job_api_requests_total",
		Help: "Requests the controller that deletes Jobs sent to the API server, by resource (jobs; jobwatchers and clusterjobwatchers: the governing watcher read past the cache, once for the deletions that asked while another read of it was under way) and verb (get, delete, and list: a history-limit deletion confirmed on a fresh list); everything else it reads comes from the cache.",
	}, []string{"resource", "verb"})
)

// The resource label of jobAPIRequests.
const (
	resourceJobs               = "jobs"
	resourceJobWatchers        = "jobwatchers"
	resourceClusterJobWatchers = "clusterjobwatchers"
)

// watcherResource is the resource label of gov's kind.
func watcherResource(gov *compiledWatcher) string {
	if gov.cluster {
		return resourceClusterJobWatchers
	}
	return resourceJobWatchers
}

func init() {
	metrics.Registry.MustRegister(jobsDeleted, deletionLag, expiredJobs, jobAPIRequests)
}

func countJob(d decision, result string) {
	k := d.Governor.key()
	jobsDeleted.WithLabelValues(k.Kind, k.Namespace, k.Name, string(d.Outcome), result).Inc()
}

// forgetMetrics drops the series of a watcher that is gone, so that churn of
// short-lived watchers does not grow the registry without bound.
func forgetMetrics(kind string, key types.NamespacedName) {
	labels := prometheus.Labels{watcherLabels[0]: kind, watcherLabels[1]: key.Namespace, watcherLabels[2]: key.Name}
	jobsDeleted.DeletePartialMatch(labels)
	expiredJobs.Delete(labels)
}
