package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NamespaceEnabledLabel is the label a namespace must carry, with the value
// "true", before any PodBugger in it may touch its pods.
const NamespaceEnabledLabel = "debug.deckhand.dev/enabled"

// Profile is the security posture of the debug container, named as in
// `kubectl debug --profile`.
// +kubebuilder:validation:Enum=restricted;baseline;general
type Profile string

const (
	// ProfileRestricted runs the container as user 65532 (non-root, whatever
	// the image's user) with no privilege escalation, every capability
	// dropped and the RuntimeDefault seccomp profile: it passes the Pod
	// Security "restricted" level.
	ProfileRestricted Profile = "restricted"
	// ProfileBaseline leaves the container runtime's defaults (root allowed,
	// default capabilities) but never privileged: it passes the Pod Security
	// "baseline" level.
	ProfileBaseline Profile = "baseline"
	// ProfileGeneral is baseline plus the SYS_PTRACE capability, to trace the
	// target container's processes. The operator must allow it with
	// --podbugger-allow-general-profile.
	ProfileGeneral Profile = "general"
)

// PodBuggerSpec says which pods get a debug container and what it runs.
// +kubebuilder:validation:XValidation:rule="!has(self.notReadyAfter) || (has(self.triggers) && 'NotReady' in self.triggers)",message="notReadyAfter needs the NotReady trigger in triggers",fieldPath=".notReadyAfter"
// +kubebuilder:validation:XValidation:rule="!has(self.incidents) || !has(self.incidents.inject) || !self.incidents.inject || (has(self.triggers) && self.triggers.exists(t, t != 'Running'))",message="incidents.inject needs a failure trigger (Error, OOMKilled, CrashLoopBackOff, NotReady or Evicted) in triggers",fieldPath=".incidents.inject"
// +kubebuilder:validation:XValidation:rule="!has(self.incidents) || !has(self.incidents.artifacts) || (has(self.triggers) && self.triggers.exists(t, t != 'Running') && ('Running' in self.triggers || (has(self.incidents.inject) && self.incidents.inject)))",message="incidents.artifacts needs a failure trigger and the Running trigger or incidents.inject: the debug container collects them",fieldPath=".incidents.artifacts"
// +kubebuilder:validation:XValidation:rule="!has(self.incidents) || !has(self.incidents.artifacts) || (!has(self.command) && !has(self.args))",message="command and args must be empty with incidents.artifacts: the debug container runs the collector",fieldPath=".command"
// +kubebuilder:validation:XValidation:rule="(has(self.command) ? self.command.map(c, size(c)).sum() : 0) + (has(self.args) ? self.args.map(a, size(a)).sum() : 0) <= 16384",message="command and args together must be at most 16384 characters",fieldPath=".args"
type PodBuggerSpec struct {
	// selector chooses the pods, in the PodBugger's own namespace, that get a
	// debug container. It must not be empty: a PodBugger never selects every
	// pod of a namespace by accident.
	// +required
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="selector must have matchLabels or matchExpressions"
	Selector metav1.LabelSelector `json:"selector"`

	// image is the debug container's image, for example
	// "docker.io/library/busybox:1.37". It must match the operator's
	// allow-list (the manager's --podbugger-allowed-images flag), compared
	// in full: "busybox:1.36" is "docker.io/library/busybox:1.36".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image"`

	// command replaces the image's entrypoint. Omitted, the image's own runs.
	// At most 64 items of 1,024 characters; command and args together at
	// most 16,384 characters (they are copied into every debugged pod).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=1024
	Command []string `json:"command,omitempty"`

	// args are the arguments to command (or to the image's entrypoint). At
	// most 256 items of 4,096 characters; command and args together at most
	// 16,384 characters.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=4096
	Args []string `json:"args,omitempty"`

	// targetContainerName names the pod container whose process namespace
	// the debug container joins (as `kubectl debug --target`). A pod without
	// a container of that name is skipped, with an Event. Omitted, the debug
	// container shares only the pod's network and volumes.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	TargetContainerName string `json:"targetContainerName,omitempty"`

	// profile is the debug container's security posture: restricted (the
	// default), baseline, or general (needs the operator's
	// --podbugger-allow-general-profile). No profile is ever privileged or
	// uses host namespaces.
	// +optional
	// +kubebuilder:default=restricted
	Profile Profile `json:"profile,omitempty"`

	// runAsUser is the user ID the debug container runs as; it must not be
	// root (0). Omitted, the restricted profile runs it as 65532 and the
	// baseline and general profiles as the image's user. Set it to the target
	// container's user to read that container's files through
	// /proc/<pid>/root under the restricted profile. (New in v1beta1.)
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2147483647
	RunAsUser *int64 `json:"runAsUser,omitempty"`

	// maxPods caps how many pods carry this PodBugger's container at once.
	// Ephemeral containers can never be removed, so the default is small.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxPods int32 `json:"maxPods,omitempty"`

	// suspend stops new injections. Containers already added stay: an
	// ephemeral container cannot be removed from a pod.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// triggers says when the PodBugger acts on a matching pod. Running (the
	// default, alone) adds the debug container to every running pod. The
	// failure triggers record a PodIncident, owned by this PodBugger, when
	// a container of a matching pod fails: Error (terminated with a non-zero
	// exit code or by a signal), OOMKilled, CrashLoopBackOff, NotReady (the
	// pod not Ready for longer than notReadyAfter) and Evicted. Recording
	// reads only and needs no namespace opt-in; without Running, no pod gets
	// a debug container unless incidents.inject says so. (New in v1beta1.)
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=6
	// +kubebuilder:default={"Running"}
	Triggers []Trigger `json:"triggers,omitempty"`

	// notReadyAfter is how long a running pod must stay not Ready before the
	// NotReady trigger records it, between 10s and 24h; 5m when omitted.
	// (New in v1beta1.)
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s') && duration(self) <= duration('24h')",message="notReadyAfter must be between 10s and 24h"
	NotReadyAfter *metav1.Duration `json:"notReadyAfter,omitempty"`

	// incidents bounds the PodIncidents the failure triggers record and says
	// whether a failing pod also gets the debug container. (New in v1beta1.)
	// +optional
	Incidents *IncidentPolicy `json:"incidents,omitempty"`
}

// Trigger is when a PodBugger acts on a pod.
// +kubebuilder:validation:Enum=Running;Error;OOMKilled;CrashLoopBackOff;NotReady;Evicted
type Trigger string

// Triggers.
const (
	// TriggerRunning: every running matching pod gets the debug container
	// (the behaviour before triggers existed, and the default).
	TriggerRunning Trigger = "Running"
	// TriggerError: a container terminated with a non-zero exit code or by
	// a signal (other than an OOM kill, which is OOMKilled).
	TriggerError Trigger = "Error"
	// TriggerOOMKilled: a container was killed for exceeding its memory limit.
	TriggerOOMKilled Trigger = "OOMKilled"
	// TriggerCrashLoopBackOff: a container failed and waits in the
	// kubelet's restart backoff.
	TriggerCrashLoopBackOff Trigger = "CrashLoopBackOff"
	// TriggerNotReady: a running pod has not been Ready for notReadyAfter.
	TriggerNotReady Trigger = "NotReady"
	// TriggerEvicted: the pod was evicted (by its kubelet under node
	// pressure, or through the eviction API).
	TriggerEvicted Trigger = "Evicted"
)

// IncidentPolicy bounds a PodBugger's PodIncidents.
type IncidentPolicy struct {
	// inject also adds the debug container to a pod when it fails (once:
	// a pod keeps the container it got, and later incidents reuse it), so
	// that the next incident's record holds its output. Injection needs what
	// the Running trigger needs: the namespace opt-in, an allowed image and
	// profile, room within maxPods.
	// +optional
	Inject bool `json:"inject,omitempty"`

	// maxRecords caps the PodIncidents this PodBugger keeps; the oldest go
	// first. Default 20, at most 200.
	// +optional
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=200
	MaxRecords int32 `json:"maxRecords,omitempty"`

	// maxAge is how long a PodIncident is kept after its last failure,
	// between 1m and 720h (30 days). Default 24h.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m') && duration(self) <= duration('720h')",message="maxAge must be between 1m and 720h"
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`

	// logTailBytes is how much of the end of the failed container's log a
	// record keeps, at most 16384 bytes. Default 4096; 0 keeps no log.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=16384
	LogTailBytes *int32 `json:"logTailBytes,omitempty"`

	// instances is how many of a record's failed instances it keeps, each
	// with its log tail, the oldest going first: at most 10. Default 5.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	Instances *int32 `json:"instances,omitempty"`

	// keepLogsAfterPodDeletion keeps a record's log tail (and its debug
	// container's output) after the pod is gone, as long as the record.
	// By default a record's log goes with its pod: once the pod is deleted,
	// the record keeps what failed and why, and logError says the log was
	// not kept.
	// +optional
	KeepLogsAfterPodDeletion bool `json:"keepLogsAfterPodDeletion,omitempty"`

	// notify names the sinks told of this PodBugger's incidents: one
	// notification when a record opens (a container starts failing) and a
	// summary when it closes (10 minutes without another failure of its
	// container and reason), each at least once, with an idempotency key.
	// The platform team configures the sinks for the manager
	// (--incident-sinks-file: a JSON webhook, Slack-compatible or
	// CloudEvents, each perhaps for some namespaces only); a name the
	// manager does not know, or that this namespace may not use, is told in
	// an Event on the PodBugger.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Notify []string `json:"notify,omitempty"`

	// redact lists RE2 patterns whose every match is removed, beside the
	// built-in detectors of credentials, from what a record keeps (log
	// tails, messages, Events) and a notification sends, replaced by
	// [REDACTED:pattern]: for secrets of a shape only you know (an internal
	// token's prefix, a customer number). At most 16, of 256 bytes; each
	// compiles to at most 2,048 instructions, and all of them together to
	// 4,096, with at most 16,384 runes of character classes. A record
	// written while a pattern cannot be used keeps no log and no message.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=256
	Redact []string `json:"redact,omitempty"`

	// artifacts collects the files a failing container leaves in a volume
	// of its pod (heap or core dumps in an emptyDir): the debug container
	// runs Deckhand's collector instead of command and args, mounts the
	// volume, and after each failure lists the new files (name, size,
	// SHA-256, truncated or not) in that instance's slot of the record,
	// keeping copies inside the same volume (.deckhand/<time>/) so that the
	// next crash does not overwrite them. Needs the Running trigger or
	// incidents.inject, an image with a POSIX shell and sha256sum
	// (busybox), and no command or args.
	// +optional
	Artifacts *IncidentArtifacts `json:"artifacts,omitempty"`
}

// Bounds of spec.incidents.artifacts.
const (
	// DefaultArtifactMaxFileBytes, MaxArtifactMaxFileBytes: how much of one
	// file is copied and hashed.
	DefaultArtifactMaxFileBytes int64 = 64 << 20
	MaxArtifactMaxFileBytes     int64 = 1 << 30
	// DefaultArtifactMaxBytes, MaxArtifactMaxBytes: how much one collection
	// (one failed instance) copies in all.
	DefaultArtifactMaxBytes int64 = 256 << 20
	MaxArtifactMaxBytes     int64 = 4 << 30
	// DefaultArtifactKeep, MaxArtifactKeep: how many collections keep their
	// copies in the volume; 0 copies nothing and mounts it read-only.
	DefaultArtifactKeep int32 = 3
	MaxArtifactKeep     int32 = 10
	// MaxArtifactFiles is how many files one failed instance lists.
	MaxArtifactFiles = 16
	// MaxArtifactContainers is how many containers artifacts may name.
	MaxArtifactContainers = 8
)

// IncidentArtifacts names the pod volume a failing container leaves its
// dumps in, and bounds what is collected from it.
// +kubebuilder:validation:XValidation:rule="!has(self.maxFileBytes) || !has(self.maxBytes) || self.maxFileBytes <= self.maxBytes",message="maxFileBytes must not exceed maxBytes",fieldPath=".maxFileBytes"
type IncidentArtifacts struct {
	// volume names a volume of the pod (spec.volumes[].name): an emptyDir,
	// a persistentVolumeClaim or an ephemeral volume. A pod without it, or
	// where it is another kind (Secrets, ConfigMaps, hostPath are never
	// read), does not get the debug container and is skipped with an
	// Event.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Volume string `json:"volume"`

	// containers are the containers whose failures list the volume's new
	// files; omitted, every container's. At most 8.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Containers []string `json:"containers,omitempty"`

	// maxFileBytes is how much of one file is copied and hashed: a longer
	// file is listed as truncated, its sha256 that of its first
	// maxFileBytes. Default 64 MiB, at most 1 GiB.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1073741824
	MaxFileBytes *int64 `json:"maxFileBytes,omitempty"`

	// maxBytes is how much one collection (the files of one failure)
	// copies in all; files beyond it are listed, not copied. Default
	// 256 MiB, at most 4 GiB.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4294967296
	MaxBytes *int64 `json:"maxBytes,omitempty"`

	// keep is how many collections keep their copies in the volume's
	// .deckhand directory, the oldest removed first. Default 3, at most
	// 10; 0 copies nothing (only lists and hashes) and mounts the volume
	// read-only.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	Keep *int32 `json:"keep,omitempty"`
}

// DebuggedPod is a pod that carries the PodBugger's container.
type DebuggedPod struct {
	// name is the pod's name.
	// +required
	Name string `json:"name"`
	// uid is the pod's UID: a new pod of the same name is a different pod.
	// +required
	UID string `json:"uid"`
	// time is when Deckhand added the container, or first saw it if it was
	// added before this status was written.
	// +required
	Time metav1.Time `json:"time"`
	// state is what the pod's kubelet reports of the container: Running,
	// Starting (being created, or its image pulled), Exited (its command
	// ended with status 0), Failed (it could not start, or ended with an
	// error; reason and message say why), or Unknown (no kubelet has
	// reported it yet; simulated nodes never do).
	// +optional
	State DebuggerState `json:"state,omitempty"`
	// reason is the kubelet's reason for a Starting, Exited or Failed
	// container, e.g. CreateContainerConfigError or ErrImagePull.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Reason string `json:"reason,omitempty"`
	// message is the kubelet's message for a Failed container, cut to 256
	// characters.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Message string `json:"message,omitempty"`
}

// DebuggerState is the state of the debug container in one pod.
// +kubebuilder:validation:Enum=Running;Starting;Exited;Failed;Unknown
type DebuggerState string

// States of a debug container.
const (
	DebuggerRunning  DebuggerState = "Running"
	DebuggerStarting DebuggerState = "Starting"
	DebuggerExited   DebuggerState = "Exited"
	DebuggerFailed   DebuggerState = "Failed"
	DebuggerUnknown  DebuggerState = "Unknown"
)

// MaxStatusPods bounds status.pods; status.installed always has the full count.
const MaxStatusPods = 50

// PodBuggerStatus is what the controller observed.
type PodBuggerStatus struct {
	// observedGeneration is the generation of the spec this status is about.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// installed is how many pods of the namespace carry this PodBugger's
	// container now.
	// +optional
	Installed int32 `json:"installed"`

	// pods lists the pods that carry the container, the earliest first, at
	// most 50 of them.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	Pods []DebuggedPod `json:"pods,omitempty"`

	// conditions: Ready (the PodBugger is doing what its spec says), Blocked
	// (a safety rule stops it; the reason says which) and Started (the
	// containers it added run, as far as the kubelets report).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Condition types.
const (
	// ConditionReady is True when the PodBugger injects (or is suspended, or
	// at maxPods) as its spec says, False when it is blocked or an injection
	// failed.
	ConditionReady = "Ready"
	// ConditionBlocked is True when a safety rule stops the PodBugger; it
	// then touches no pod.
	ConditionBlocked = "Blocked"
	// ConditionStarted is True when every container the PodBugger added runs
	// (or ran and exited 0), False when one could not start or failed,
	// Unknown while one starts or no kubelet reports it.
	ConditionStarted = "Started"
)

// Condition reasons.
const (
	// ReasonNamespaceNotEnabled: the namespace lacks the label
	// debug.deckhand.dev/enabled=true.
	ReasonNamespaceNotEnabled = "NamespaceNotEnabled"
	// ReasonImageNotAllowed: spec.image matches no pattern of the operator's
	// allow-list.
	ReasonImageNotAllowed = "ImageNotAllowed"
	// ReasonProfileNotAllowed: the general profile without the operator's
	// --podbugger-allow-general-profile.
	ReasonProfileNotAllowed = "ProfileNotAllowed"
	// ReasonRootUser: spec.runAsUser is root (0) or below; the schema
	// refuses it, but a v1alpha1 write carries it in its conversion-data
	// annotation past the schema.
	ReasonRootUser = "RootUser"
	// ReasonCaptureOnly: the PodBugger has no Running trigger and injects
	// into no pod on its own; it records incidents.
	ReasonCaptureOnly = "CaptureOnly"
	// ReasonAllowed: no safety rule stops the PodBugger.
	ReasonAllowed = "Allowed"
	// ReasonActive: matching running pods get the container.
	ReasonActive = "Active"
	// ReasonSuspended: spec.suspend stops new injections.
	ReasonSuspended = "Suspended"
	// ReasonMaxPodsReached: maxPods pods carry the container; no more get it.
	ReasonMaxPodsReached = "MaxPodsReached"
	// ReasonInjectionFailed: the apiserver refused to add the container to
	// a pod; the message and the pod's Events say why.
	ReasonInjectionFailed = "InjectionFailed"
	// ReasonAllStarted: every container added runs or exited 0.
	ReasonAllStarted = "AllStarted"
	// ReasonStartFailed: a container could not start or failed; status.pods
	// and the message name the pod and the kubelet's reason.
	ReasonStartFailed = "StartFailed"
	// ReasonStarting: a container is being created or its image pulled.
	ReasonStarting = "Starting"
	// ReasonStatusUnknown: no kubelet reports a container's state.
	ReasonStatusUnknown = "StatusUnknown"
)

// PodBugger adds one ephemeral debug container, named after the PodBugger,
// to every running pod of its namespace that matches spec.selector, once per
// pod. The namespace must opt in with the label debug.deckhand.dev/enabled=true
// and the image must be on the operator's allow-list.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pb;pbug,categories=deckhand
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`
// +kubebuilder:printcolumn:name="Profile",type=string,JSONPath=`.spec.profile`
// +kubebuilder:printcolumn:name="Installed",type=integer,JSONPath=`.status.installed`
// +kubebuilder:printcolumn:name="Max",type=integer,JSONPath=`.spec.maxPods`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PodBugger struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says which pods get a debug container and what it runs.
	// +required
	Spec PodBuggerSpec `json:"spec"`

	// status is what the controller observed.
	// +optional
	Status PodBuggerStatus `json:"status,omitempty"`
}

// PodBuggerList is a list of PodBuggers.
// +kubebuilder:object:root=true
type PodBuggerList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the PodBuggers.
	Items []PodBugger `json:"items"`
}
