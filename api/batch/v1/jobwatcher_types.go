package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Annotations a Job can carry to override the watchers' TTLs for itself.
const (
	// TTLAnnotation on a Job sets its TTL after it finishes, whatever its
	// outcome, as a Go duration ("90s", "36h"). It wins over every watcher.
	TTLAnnotation = "batch.deckhand.dev/ttl"
	// KeepAnnotation set to "true" on a Job keeps it: no watcher deletes it.
	KeepAnnotation = "batch.deckhand.dev/keep"
)

// ProtectedNamespaceLabel set to "true" on a namespace protects it from
// ClusterJobWatchers, as the manager's --jobwatcher-protected-namespaces
// do: no ClusterJobWatcher deletes its Jobs unless one of its
// namespacePatterns names it exactly. Setting a namespace's labels is a
// cluster administrator's right, not its tenants'.
const ProtectedNamespaceLabel = "deckhand.dev/protected"

// ResumeDeletionsAnnotation on a watcher acknowledges a tripped deletion
// circuit breaker: setting it to a value it did not have when the breaker
// tripped (a timestamp, a ticket number) resumes the deletions, and lets the
// burst of deletions in progress through (see spec.maxDeletionsPerMinute).
const ResumeDeletionsAnnotation = "batch.deckhand.dev/resume-deletions"

// Bounds and default of spec.maxDeletionsPerMinute.
const (
	// DefaultMaxDeletionsPerMinute is the breaker's limit when
	// spec.maxDeletionsPerMinute is unset: a backlog of hundreds of expired
	// Jobs (a new watcher over a namespace with history) goes without
	// tripping it.
	DefaultMaxDeletionsPerMinute = 1000
	// MaxMaxDeletionsPerMinute bounds spec.maxDeletionsPerMinute.
	MaxMaxDeletionsPerMinute = 100000
)

// MaxWouldDelete bounds status.wouldDelete.
const MaxWouldDelete = 50

// Bounds of a failure record, so that status.recentFailures stays small
// (at most about 10 KiB a record).
const (
	// MaxFailureRecords bounds spec.failureRecords and status.recentFailures.
	MaxFailureRecords = 10
	// MaxFailedPods is how many failed pods one record describes.
	MaxFailedPods = 3
	// MaxFailedContainers is how many containers of a pod it describes.
	MaxFailedContainers = 3
	// MaxMessageLength bounds each reason message kept.
	MaxMessageLength = 256
	// MaxLogTailLines and MaxLogTailBytes bound a container's log tail.
	MaxLogTailLines = 5
	MaxLogTailBytes = 512
)

// History groups: what a watcher's history limits count.
const (
	// HistoryByNamespace counts the Jobs the watcher matches in each
	// namespace.
	HistoryByNamespace = "Namespace"
	// HistoryByNamePrefix counts them per namespace and name prefix: the
	// name without its last dash-separated part, as a CronJob names its Jobs
	// ("nightly-29012345" counts as "nightly").
	HistoryByNamePrefix = "NamePrefix"
)

// Condition types and reasons of both watcher kinds.
const (
	// ConditionReady says whether the watcher acts on the Jobs it governs.
	ConditionReady = "Ready"

	// ReasonActive: the watcher deletes the Jobs it governs when they expire.
	ReasonActive = "Active"
	// ReasonDryRun: the watcher reports the Jobs it would delete and deletes none.
	ReasonDryRun = "DryRun"
	// ReasonSuspended: the watcher deletes nothing; the Jobs it governs wait.
	ReasonSuspended = "Suspended"
	// ReasonInvalidSpec: the spec cannot be used (it got past admission
	// without the webhook); the watcher matches no Job.
	ReasonInvalidSpec = "InvalidSpec"

	// ConditionDeletionsPaused says whether the watcher's deletion circuit
	// breaker tripped: True, it deletes nothing until its owner
	// acknowledges (ResumeDeletionsAnnotation) or changes its spec.
	ConditionDeletionsPaused = "DeletionsPaused"
	// ReasonTooManyDeletions: more Jobs were due within a minute than
	// spec.maxDeletionsPerMinute allows; the breaker tripped.
	ReasonTooManyDeletions = "TooManyDeletions"
	// ReasonWithinLimit: the deletions are within the limit.
	ReasonWithinLimit = "WithinLimit"
	// ReasonAcknowledged: the owner acknowledged a tripped breaker; the
	// burst of deletions in progress goes through.
	ReasonAcknowledged = "Acknowledged"
)

// JobPolicy is what both watcher kinds share: which Jobs, and how long they
// stay after they finish.
// +kubebuilder:validation:XValidation:rule="has(self.ttlSecondsAfterSucceeded) || has(self.ttlSecondsAfterFailed) || has(self.successfulJobsHistoryLimit) || has(self.failedJobsHistoryLimit)",message="at least one of ttlSecondsAfterSucceeded, ttlSecondsAfterFailed, successfulJobsHistoryLimit and failedJobsHistoryLimit must be set"
type JobPolicy struct {
	// ttlSecondsAfterSucceeded is how long a Job that completed successfully
	// stays after it finished. Unset: this watcher has no say over succeeded
	// Jobs (a watcher further down the precedence may have; without one they
	// are kept).
	// +optional
	// +kubebuilder:validation:Minimum=0
	TTLSecondsAfterSucceeded *int32 `json:"ttlSecondsAfterSucceeded,omitempty"`

	// ttlSecondsAfterFailed is how long a failed Job stays after it finished.
	// Unset: this watcher has no say over failed Jobs.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TTLSecondsAfterFailed *int32 `json:"ttlSecondsAfterFailed,omitempty"`

	// successfulJobsHistoryLimit keeps only the newest N succeeded Jobs this
	// watcher matches (by finish time, counted per historyGroupBy): older
	// ones go at once, before their TTL, unless a policy or annotation that
	// the precedence puts first keeps them longer. Without a succeeded TTL,
	// the newest N stay until newer ones push them out. Unset: no limit.
	// +optional
	// +kubebuilder:validation:Minimum=0
	SuccessfulJobsHistoryLimit *int32 `json:"successfulJobsHistoryLimit,omitempty"`

	// failedJobsHistoryLimit is the same for failed Jobs.
	// +optional
	// +kubebuilder:validation:Minimum=0
	FailedJobsHistoryLimit *int32 `json:"failedJobsHistoryLimit,omitempty"`

	// historyGroupBy is what the history limits count: Namespace (default),
	// the Jobs the watcher matches in each namespace; NamePrefix, those of
	// each namespace and name prefix (the name without its last
	// dash-separated part: a CronJob's Jobs, "nightly-29012345", count as
	// "nightly").
	// +optional
	// +kubebuilder:validation:Enum=Namespace;NamePrefix
	HistoryGroupBy string `json:"historyGroupBy,omitempty"`

	// failureRecords is how many failure records status.recentFailures
	// keeps, newest first: before the watcher deletes a failed Job it
	// records why the Job failed (its reason and message, each failed pod's
	// node, exit codes, termination reasons and last log lines). 0 records
	// nothing. Unset: 5.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	FailureRecords *int32 `json:"failureRecords,omitempty"`

	// jobNamePatterns are RE2 regular expressions; a Job matches when its
	// whole name matches one of them. Empty matches every name.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=1024
	JobNamePatterns []string `json:"jobNamePatterns,omitempty"`

	// excludeJobNamePatterns are RE2 regular expressions; a Job whose whole
	// name matches one of them is never matched.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=1024
	ExcludeJobNamePatterns []string `json:"excludeJobNamePatterns,omitempty"`

	// selector limits the watcher to Jobs with these labels. Unset matches
	// every Job.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// dryRun makes the watcher delete nothing: the Jobs it would delete are
	// listed in status.wouldDelete and get a WouldDelete Event.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`

	// propagationPolicy is how a deleted Job's pods go: Background (default:
	// the garbage collector deletes them right after the Job), Foreground
	// (the Job goes once its pods are gone) or Orphan (the pods stay).
	// +optional
	// +kubebuilder:validation:Enum=Background;Foreground;Orphan
	// +kubebuilder:default=Background
	PropagationPolicy *metav1.DeletionPropagation `json:"propagationPolicy,omitempty"`

	// suspend stops the watcher from deleting: the Jobs it governs wait until
	// it is resumed; no other watcher takes them over.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// maxDeletionsPerMinute is the watcher's deletion circuit breaker: when
	// more of the Jobs it governs are due within one minute, it deletes the
	// first maxDeletionsPerMinute, then stops (condition DeletionsPaused,
	// Event TooManyDeletions) until its owner sets the annotation
	// batch.deckhand.dev/resume-deletions to a new value (which lets the
	// burst in progress through) or changes the spec (which starts a new
	// minute). Unset: 1000.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	MaxDeletionsPerMinute *int32 `json:"maxDeletionsPerMinute,omitempty"`
}

// JobWatcherSpec is the policy of a JobWatcher.
type JobWatcherSpec struct {
	JobPolicy `json:",inline"`
}

// ClusterJobWatcherSpec is the policy of a ClusterJobWatcher: a JobPolicy and
// the namespaces it reaches.
type ClusterJobWatcherSpec struct {
	JobPolicy `json:",inline"`

	// namespacePatterns are RE2 regular expressions; the watcher reaches the
	// namespaces whose whole name matches one of them. Empty reaches every
	// namespace.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=1024
	NamespacePatterns []string `json:"namespacePatterns,omitempty"`

	// excludeNamespacePatterns are RE2 regular expressions; the watcher never
	// reaches a namespace whose whole name matches one of them.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=1024
	ExcludeNamespacePatterns []string `json:"excludeNamespacePatterns,omitempty"`
}

// JobWatcherStatus is what a watcher of either kind observed.
type JobWatcherStatus struct {
	// lastRunStartTime is when the controller last began evaluating the Jobs
	// this watcher reaches and found something changed.
	// +optional
	LastRunStartTime *metav1.Time `json:"lastRunStartTime,omitempty"`

	// lastRunEndTime is when that evaluation ended.
	// +optional
	LastRunEndTime *metav1.Time `json:"lastRunEndTime,omitempty"`

	// matchedJobs is how many Jobs, running or finished, the watcher matches.
	// +optional
	MatchedJobs int32 `json:"matchedJobs"`

	// pendingDeletions is how many finished Jobs this watcher governs that
	// wait for their TTL (or, suspended, for the watcher to resume).
	// +optional
	PendingDeletions int32 `json:"pendingDeletions"`

	// deletedJobs is how many Jobs this watcher has deleted.
	// +optional
	DeletedJobs int64 `json:"deletedJobs"`

	// countedDeletions marks which deletions deletedJobs counts: the running
	// controller's instance and how many of its deletions
	// ("<instance>/<n>"). It is written together with deletedJobs, so that a
	// status write retried after its response was lost counts nothing twice.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	CountedDeletions string `json:"countedDeletions,omitempty"`

	// nextDeletionTime is when the next Job this watcher governs expires.
	// +optional
	NextDeletionTime *metav1.Time `json:"nextDeletionTime,omitempty"`

	// wouldDelete lists, in dry run, the expired Jobs this watcher would have
	// deleted ("namespace/name", sorted, at most 50).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	WouldDelete []string `json:"wouldDelete,omitempty"`

	// recentFailures records, newest first, why the last failed Jobs this
	// watcher deleted had failed (at most spec.failureRecords).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	RecentFailures []FailureRecord `json:"recentFailures,omitempty"`

	// resumeDeletions is the value of the batch.deckhand.dev/resume-deletions
	// annotation when this status was written: a tripped breaker
	// (DeletionsPaused True) stays tripped, across restarts, until the
	// annotation differs from it or the generation changes.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	ResumeDeletions string `json:"resumeDeletions,omitempty"`

	// deletionWindows is what the deletion circuit breaker counted in the
	// minute before this status was written: for a JobWatcher one entry, for
	// a ClusterJobWatcher one per namespace it deleted in (its breaker counts
	// per namespace). A new leader starts from it, so that
	// spec.maxDeletionsPerMinute holds across a failover.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	DeletionWindows []DeletionWindow `json:"deletionWindows,omitempty"`

	// pausedNamespaces lists, for a ClusterJobWatcher, the namespaces whose
	// deletions its breaker holds (DeletionsPaused True); the other
	// namespaces it reaches keep being cleaned up. Empty while
	// DeletionsPaused is True: a trip of an earlier release, which paused
	// the watcher as a whole, and holds every namespace it reaches until
	// acknowledged.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	PausedNamespaces []string `json:"pausedNamespaces,omitempty"`

	// observedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready, DeletionsPaused.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DeletionWindow is how many Jobs a watcher deleted (in one namespace, for
// a ClusterJobWatcher) in the minute before its newest deletion.
type DeletionWindow struct {
	// namespace is the namespace counted; empty for a JobWatcher.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// deletions is how many Jobs were deleted in the minute up to newest.
	// +required
	// +kubebuilder:validation:Minimum=0
	Deletions int32 `json:"deletions"`
	// newest is when the newest of them was deleted (rounded up to the
	// second).
	// +required
	Newest metav1.Time `json:"newest"`
}

// FailureRecord is what a failed Job taught before it was deleted.
type FailureRecord struct {
	// job is the Job's name.
	// +required
	Job string `json:"job"`
	// namespace is the Job's namespace.
	// +required
	Namespace string `json:"namespace"`
	// uid is the Job's UID.
	// +required
	UID types.UID `json:"uid"`
	// failedAt is when the Job's Failed condition turned true.
	// +optional
	FailedAt metav1.Time `json:"failedAt,omitempty"`
	// deletedAt is when the watcher deleted the Job.
	// +optional
	DeletedAt metav1.Time `json:"deletedAt,omitempty"`
	// reason of the Job's Failed condition (BackoffLimitExceeded,
	// DeadlineExceeded, PodFailurePolicy, ...).
	// +optional
	Reason string `json:"reason,omitempty"`
	// message of the Job's Failed condition (shortened).
	// +optional
	Message string `json:"message,omitempty"`
	// pods are the Job's failed pods that were still there (at most 3).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=3
	Pods []PodFailure `json:"pods,omitempty"`
}

// PodFailure is one failed pod of a failed Job.
type PodFailure struct {
	// name of the pod.
	// +required
	Name string `json:"name"`
	// node the pod ran on.
	// +optional
	Node string `json:"node,omitempty"`
	// reason and message of the pod's status (Evicted, DeadlineExceeded, ...).
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// containers are the pod's containers that terminated with an error
	// (at most 3).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=3
	Containers []ContainerFailure `json:"containers,omitempty"`
}

// ContainerFailure is how one container of a failed pod ended.
type ContainerFailure struct {
	// name of the container.
	// +required
	Name string `json:"name"`
	// exitCode it ended with.
	// +optional
	ExitCode int32 `json:"exitCode"`
	// reason of its termination (Error, OOMKilled, ...).
	// +optional
	Reason string `json:"reason,omitempty"`
	// message of its termination (its termination log, shortened).
	// +optional
	Message string `json:"message,omitempty"`
	// logTail is the end of its log (at most 5 lines, 512 bytes), when its
	// node served it; logError says why not otherwise. A ClusterJobWatcher's
	// records have neither: its status is cluster-scoped, and a tenant's log
	// is not read for it.
	// +optional
	LogTail string `json:"logTail,omitempty"`
	// +optional
	LogError string `json:"logError,omitempty"`
}

// JobWatcher deletes the finished Jobs of its own namespace after per-outcome
// TTLs.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=jw,categories=deckhand
// +kubebuilder:printcolumn:name="Succeeded TTL",type=integer,JSONPath=`.spec.ttlSecondsAfterSucceeded`
// +kubebuilder:printcolumn:name="Failed TTL",type=integer,JSONPath=`.spec.ttlSecondsAfterFailed`
// +kubebuilder:printcolumn:name="Matched",type=integer,JSONPath=`.status.matchedJobs`
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.status.pendingDeletions`
// +kubebuilder:printcolumn:name="Deleted",type=integer,JSONPath=`.status.deletedJobs`
// +kubebuilder:printcolumn:name="Next",type=string,JSONPath=`.status.nextDeletionTime`
// +kubebuilder:printcolumn:name="Dry Run",type=boolean,JSONPath=`.spec.dryRun`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type JobWatcher struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the policy.
	// +required
	Spec JobWatcherSpec `json:"spec"`
	// status is what the controller observed.
	// +optional
	Status JobWatcherStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// JobWatcherList is a list of JobWatchers.
type JobWatcherList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []JobWatcher `json:"items"`
}

// ClusterJobWatcher deletes finished Jobs after per-outcome TTLs in the
// namespaces its patterns choose.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=cjw,categories=deckhand
// +kubebuilder:printcolumn:name="Succeeded TTL",type=integer,JSONPath=`.spec.ttlSecondsAfterSucceeded`
// +kubebuilder:printcolumn:name="Failed TTL",type=integer,JSONPath=`.spec.ttlSecondsAfterFailed`
// +kubebuilder:printcolumn:name="Matched",type=integer,JSONPath=`.status.matchedJobs`
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.status.pendingDeletions`
// +kubebuilder:printcolumn:name="Deleted",type=integer,JSONPath=`.status.deletedJobs`
// +kubebuilder:printcolumn:name="Next",type=string,JSONPath=`.status.nextDeletionTime`
// +kubebuilder:printcolumn:name="Dry Run",type=boolean,JSONPath=`.spec.dryRun`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterJobWatcher struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the policy and the namespaces it reaches.
	// +required
	Spec ClusterJobWatcherSpec `json:"spec"`
	// status is what the controller observed.
	// +optional
	Status JobWatcherStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ClusterJobWatcherList is a list of ClusterJobWatchers.
type ClusterJobWatcherList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterJobWatcher `json:"items"`
}
