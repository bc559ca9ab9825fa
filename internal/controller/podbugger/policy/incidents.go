package policy

import (
	"time"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
)

// Defaults of spec.incidents, applied here as well as by the schema: a
// PodBugger written as v1alpha1, or with webhooks off, may lack them.
const (
	defaultMaxRecords   = 20
	defaultMaxAge       = 24 * time.Hour
	defaultLogTailBytes = 4096
)

// IncidentLimits are a PodBugger's bounds on its records.
type IncidentLimits struct {
	MaxRecords   int
	MaxAge       time.Duration
	LogTailBytes int
	// Instances is how many failed instances a record keeps.
	Instances int
	// KeepLogs keeps a record's logs after its pod is gone.
	KeepLogs bool
}

// IncidentLimitsOf is pb's bounds on its records: spec.incidents, with its
// defaults.
func IncidentLimitsOf(pb *debugv1beta1.PodBugger) IncidentLimits {
	l := IncidentLimits{MaxRecords: defaultMaxRecords, MaxAge: defaultMaxAge, LogTailBytes: defaultLogTailBytes,
		Instances: debugv1beta1.DefaultIncidentInstances}
	if in := pb.Spec.Incidents; in != nil {
		if in.MaxRecords > 0 {
			l.MaxRecords = int(min(in.MaxRecords, 200))
		}
		if in.MaxAge != nil && in.MaxAge.Duration > 0 {
			l.MaxAge = in.MaxAge.Duration
		}
		if in.LogTailBytes != nil {
			l.LogTailBytes = int(max(0, min(*in.LogTailBytes, debugv1beta1.MaxIncidentLogTail)))
		}
		if in.Instances != nil {
			l.Instances = int(max(1, min(*in.Instances, debugv1beta1.MaxIncidentInstances)))
		}
		l.KeepLogs = in.KeepLogsAfterPodDeletion
	}
	// The instances' log tails together fit MaxIncidentInstanceLogs.
	if l.LogTailBytes > 0 {
		l.Instances = max(1, min(l.Instances, debugv1beta1.MaxIncidentInstanceLogs/l.LogTailBytes))
	}
	return l
}

// DefaultIncidentWritesPerMinute is how many PodIncidents (new ones, or a
// failure counted in one) a PodBugger writes in a minute unless the
// operator says otherwise (--podbugger-incident-writes-per-minute). A
// record may hold 40 KB (its log tail, messages, Events), and a tenant
// decides how many of its pods fail: 1,000 crash-looping pods wrote 33
// records a second into etcd, most of them pruned a second later
// (maxRecords). At 10 a second, with a burst of a minute's sixth, the
// failures of pods failing together are recorded at once up to 100, and
// a PodBugger puts at most about 400 KB a second into etcd.
const DefaultIncidentWritesPerMinute = 600
