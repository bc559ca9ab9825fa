package incident

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// captureSeconds is how long after a failure (the kubelet's finishedAt, or
// when a pod stopped being Ready or was evicted) its record was written.
// finishedAt has whole seconds: each figure is up to a second long.
var captureSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "deckhand_podbugger_incident_capture_seconds",
	Help:    "Time from a pod's failure (the kubelet's finishedAt, to the second) to its PodIncident written, by reason.",
	Buckets: []float64{0.25, 0.5, 1, 1.5, 2, 3, 5, 10, 30, 60},
}, []string{"reason"})

// logWrittenSeconds is how long after a failure its record's log (or why
// none could be read) was written into the record, which is written first.
var logWrittenSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
	Name:    "deckhand_podbugger_incident_log_seconds",
	Help:    "Time from a pod's failure (the kubelet's finishedAt, to the second) to its failed instance's log written into its PodIncident.",
	Buckets: []float64{0.25, 0.5, 1, 1.5, 2, 3, 5, 10, 30, 60},
})

func init() {
	metrics.Registry.MustRegister(captureSeconds, logWrittenSeconds)
}

// What the recorder dropped, the work label of dropped.
const (
	droppedLog   = "log"
	droppedEvent = "event"
)

// dropped counts the work a namespace's share of the recorder's queues
// (or the queues' bound) left undone. It has no namespace label: a series
// per namespace would grow with the tenants, and which namespace lost what
// is said where its users look (a record's logError, the manager's log).
var dropped = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "deckhand_podbugger_incident_dropped_total",
	Help: "Log reads and Events of PodIncidents dropped because their namespace's share of the recorder's queue, or the whole queue, was full, by work (log, event).",
}, []string{"work"})

func init() {
	metrics.Registry.MustRegister(dropped)
}

// writesDeferred counts the times a failure's record write waited for its
// PodBugger's bucket of record writes (recordWrites): each is written when
// the bucket allows, as its pod then shows it.
var writesDeferred = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "deckhand_podbugger_incident_writes_deferred_total",
	Help: "Times a failure's PodIncident write waited because their PodBugger had written its --podbugger-incident-writes-per-minute; each is written once the PodBugger's writes allow, as its pod then shows it.",
})

func init() {
	metrics.Registry.MustRegister(writesDeferred)
}

// notifications counts what became of each notification handed to a sink:
// delivered (a 2xx answer), or undelivered (no 2xx within the Outbox's
// hour of retries, or dropped: its namespace had too many waiting). By
// outcome only: a series per namespace or sink would grow with tenants.
var notifications = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "deckhand_podbugger_notifications_total",
	Help: "Notifications of PodIncidents handed to a sink, by outcome: delivered (a 2xx answer) or undelivered (no 2xx within an hour of retries, or dropped when its namespace had too many waiting).",
}, []string{"outcome"})

func init() {
	metrics.Registry.MustRegister(notifications)
}

// secretEnvReads counts the Secrets the recorder read (or tried to) for
// the values a failing pod's environment takes from them, which its record
// then removes wherever they appear (--podbugger-redact-secret-env). By
// outcome only: a series per namespace would grow with tenants.
var secretEnvReads = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "deckhand_podbugger_secret_env_reads_total",
	Help: "Secrets a failing pod's environment takes values from, read for its PodIncident to remove those values, by outcome: read, forbidden (the namespace did not bind the manager the deckhand-podbugger-secret-env ClusterRole: only the detectors and patterns apply), missing or failed.",
}, []string{"outcome"})

func init() {
	metrics.Registry.MustRegister(secretEnvReads)
}
