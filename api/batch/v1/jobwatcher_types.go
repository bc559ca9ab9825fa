package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotations a Job can carry to override the watchers' TTLs for itself.
const (
	// TTLAnnotation on a Job sets its TTL after it finishes, whatever its
	// outcome, as a Go duration ("90s", "36h"). It wins over every watcher.
	TTLAnnotation = "batch.deckhand.dev/ttl"
	// KeepAnnotation set to "true" on a Job keeps it: no watcher deletes it.
	KeepAnnotation = "batch.deckhand.dev/keep"
)

// MaxWouldDelete bounds status.wouldDelete.
const MaxWouldDelete = 50

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
)

// JobPolicy is what both watcher kinds share: which Jobs, and how long they
// stay after they finish.
// +kubebuilder:validation:XValidation:rule="has(self.ttlSecondsAfterSucceeded) || has(self.ttlSecondsAfterFailed)",message="at least one of ttlSecondsAfterSucceeded and ttlSecondsAfterFailed must be set"
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

	// observedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
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
// +kubebuilder:printcolumn:name="Next",type=date,JSONPath=`.status.nextDeletionTime`
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
// +kubebuilder:printcolumn:name="Next",type=date,JSONPath=`.status.nextDeletionTime`
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
