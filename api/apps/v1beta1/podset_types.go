package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// MaxReplicas is the largest spec.replicas a PodSet accepts: far beyond what
// one set should hold, small enough that a typo (an extra zero or three) is
// refused instead of flooding a cluster.
const MaxReplicas = 10000

// Labels and annotations Deckhand puts on, or reads from, a PodSet's pods.
const (
	// PodSetLabel names the PodSet that owns a pod; status.selector selects
	// on it.
	PodSetLabel = "apps.deckhand.dev/podset"
	// PodTemplateHashLabel is the hash of the template a pod was made from;
	// a pod whose hash differs from the PodSet's current one is outdated.
	PodTemplateHashLabel = "apps.deckhand.dev/pod-template-hash"
	// DeleteFirstAnnotation, set to "true" on a pod by a user, makes that pod
	// the first to go when its PodSet scales down (or rolls out), ahead of
	// every other rule.
	DeleteFirstAnnotation = "apps.deckhand.dev/delete-first"
)

// PodSetUpdateStrategyType says how a PodSet replaces pods made from an older
// template.
// +kubebuilder:validation:Enum=RollingUpdate;OnDelete
type PodSetUpdateStrategyType string

const (
	// RollingUpdateStrategy replaces outdated pods by itself, never leaving
	// more than maxUnavailable of the desired pods not ready.
	RollingUpdateStrategy PodSetUpdateStrategyType = "RollingUpdate"
	// OnDeleteStrategy replaces an outdated pod only once someone deletes it.
	OnDeleteStrategy PodSetUpdateStrategyType = "OnDelete"
)

// PodSetSpec is the desired state of a PodSet.
type PodSetSpec struct {
	// replicas is the number of pods the PodSet keeps running (v1alpha1
	// called it size). `kubectl scale --replicas` and a
	// HorizontalPodAutoscaler set it through the scale subresource.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +required
	Replicas int32 `json:"replicas"`

	// template describes the pods. Without it the pods run busybox with
	// `sleep 3600`. A template needs at least one label and one container,
	// every container an image; restartPolicy must be Always (the default)
	// and activeDeadlineSeconds is refused. Admission also checks the pod the
	// template makes as the apiserver checks any pod.
	// +kubebuilder:validation:XValidation:rule="has(self.metadata) && has(self.metadata.labels) && size(self.metadata.labels) > 0",message="must have at least one label",fieldPath=".metadata.labels"
	// +kubebuilder:validation:XValidation:rule="has(self.spec) && size(self.spec.containers) > 0",message="must have at least one container",fieldPath=".spec.containers"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.restartPolicy) || self.spec.restartPolicy == 'Always'",message="must be Always: a PodSet replaces pods that end",fieldPath=".spec.restartPolicy"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.activeDeadlineSeconds)",message="is forbidden: a PodSet's pods run until they are replaced",fieldPath=".spec.activeDeadlineSeconds"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || self.spec.containers.all(c, has(c.image) && c.image != '')",message="every container needs an image",fieldPath=".spec.containers"
	// +optional
	Template *corev1.PodTemplateSpec `json:"template,omitempty"`

	// minReadySeconds is how long a pod must have been ready, with no
	// container crashing, to count as available (status.availableReplicas,
	// the Available condition, and a rolling update's maxUnavailable). The
	// default 0 makes a pod available as soon as it is ready.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MinReadySeconds int32 `json:"minReadySeconds,omitempty"`

	// updateStrategy says how pods made from an older template are replaced
	// after the template changes. The default is RollingUpdate with
	// maxUnavailable 1.
	// +kubebuilder:default={type: RollingUpdate}
	// +optional
	UpdateStrategy PodSetUpdateStrategy `json:"updateStrategy,omitzero"`
}

// PodSetUpdateStrategy says how outdated pods are replaced.
// +kubebuilder:validation:XValidation:rule="self.type == 'RollingUpdate' || !has(self.rollingUpdate)",message="rollingUpdate is only allowed with type RollingUpdate",fieldPath=".rollingUpdate"
type PodSetUpdateStrategy struct {
	// type is RollingUpdate (the default: outdated pods are replaced by the
	// controller) or OnDelete (only once a user deletes them).
	// +kubebuilder:default=RollingUpdate
	// +optional
	Type PodSetUpdateStrategyType `json:"type,omitempty"`
	// rollingUpdate tunes a rolling update: how many pods may be unavailable
	// and how many may be created beyond replicas. Only with type
	// RollingUpdate. (v1alpha1 had these two fields directly under
	// updateStrategy.)
	// +optional
	RollingUpdate PodSetRollingUpdate `json:"rollingUpdate,omitzero"`
}

// PodSetRollingUpdate tunes a rolling update, as a Deployment's
// strategy.rollingUpdate does.
// +kubebuilder:validation:XValidation:rule="!has(self.maxUnavailable) || !(string(self.maxUnavailable) in ['0', '0%']) || (has(self.maxSurge) && !(string(self.maxSurge) in ['0', '0%']))",message="maxUnavailable and maxSurge cannot both be 0: no rollout could start",fieldPath=".maxUnavailable"
type PodSetRollingUpdate struct {
	// maxUnavailable is how many of the desired pods may be unavailable while
	// a rolling update replaces pods: a number or a percentage of replicas
	// (rounded down). It may be 0 only with a maxSurge above 0. The default
	// is 1.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^([0-9]|[1-9][0-9]|100)%$')",message="must be an integer of at least 0 or a percentage from 0% to 100%"
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
	// maxSurge is how many pods beyond replicas a rolling update may create
	// before it removes outdated ones: a number or a percentage of replicas
	// (rounded up). The default is 0: outdated pods are removed first.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^([0-9]|[1-9][0-9]|100)%$')",message="must be an integer of at least 0 or a percentage from 0% to 100%"
	// +optional
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`
}

// PodSetStatus is the observed state of a PodSet.
type PodSetStatus struct {
	// podNames are the names of the PodSet's pods that are neither finished
	// nor being deleted, sorted. (v1alpha1 called them nodes;
	// they were never node names.)
	// +listType=atomic
	// +optional
	PodNames []string `json:"podNames,omitempty"`

	// replicas is the number of pods that are neither finished nor being
	// deleted.
	// +optional
	Replicas int32 `json:"replicas"`

	// readyReplicas is how many of those pods are ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`

	// availableReplicas is how many of those pods are available: ready for
	// at least minReadySeconds.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas"`

	// terminatingReplicas is how many of the PodSet's pods are being deleted
	// (graceful termination) and have not finished.
	// +optional
	TerminatingReplicas int32 `json:"terminatingReplicas"`

	// updatedReplicas is how many of those pods run the current template.
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas"`

	// selector is the label selector of the PodSet's pods, in string form,
	// for the scale subresource and HorizontalPodAutoscalers.
	// +optional
	Selector string `json:"selector,omitempty"`

	// observedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions are Available, Progressing and ReplicaFailure.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Condition types of a PodSet.
const (
	// ConditionAvailable is True when at least replicas - maxUnavailable pods
	// are available.
	ConditionAvailable = "Available"
	// ConditionProgressing is True while the PodSet creates, deletes or
	// replaces pods or waits for them to become ready, and False once every
	// desired pod runs the current template and is ready.
	ConditionProgressing = "Progressing"
	// ConditionReplicaFailure is True when the last attempt to create or
	// delete pods failed (a quota, an admission webhook, a permission).
	ConditionReplicaFailure = "ReplicaFailure"
)

// Condition reasons of a PodSet.
const (
	// ReasonMinimumReplicasAvailable: Available: at least replicas - maxUnavailable pods are available.
	ReasonMinimumReplicasAvailable = "MinimumReplicasAvailable"
	// ReasonMinimumReplicasUnavailable: Available is False: fewer pods are available than replicas - maxUnavailable.
	ReasonMinimumReplicasUnavailable = "MinimumReplicasUnavailable"
	// ReasonScalingUp: Progressing: fewer pods exist than wanted; more are being created.
	ReasonScalingUp = "ScalingUp"
	// ReasonScalingDown: Progressing: more pods exist than wanted; some are being deleted.
	ReasonScalingDown = "ScalingDown"
	// ReasonUpdating: Progressing: pods that do not run the current template are being replaced.
	ReasonUpdating = "Updating"
	// ReasonWaitingForReady: Progressing: every pod runs the current template; some are not ready yet.
	ReasonWaitingForReady = "WaitingForReady"
	// ReasonUpToDate: Progressing is False: every pod runs the current template and is ready.
	ReasonUpToDate = "UpToDate"
	// ReasonFailedCreate: ReplicaFailure: creating pods failed.
	ReasonFailedCreate = "FailedCreate"
	// ReasonFailedDelete: ReplicaFailure: deleting pods failed.
	ReasonFailedDelete = "FailedDelete"
)

// PodSet keeps a number of pods of a template running, replaces pods that end or are
// deleted, and rolls out template changes.
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name: must be no more than 63 characters: it is the value of the apps.deckhand.dev/podset label on the pods"
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=ps,categories=deckhand
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Current",type=integer,JSONPath=`.status.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Up-to-date",type=integer,JSONPath=`.status.updatedReplicas`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PodSet struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// spec is the desired state.
	// +required
	Spec PodSetSpec `json:"spec"`

	// status is what the controller last observed.
	// +optional
	Status PodSetStatus `json:"status,omitzero"`
}

// PodSetList is a list of PodSets.
// +kubebuilder:object:root=true
type PodSetList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitzero"`
	// items are the PodSets.
	Items []PodSet `json:"items"`
}
