package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels every PodIncident carries, so that the controller finds a pod's
// records without reading them all (label values are bounded; names are not).
const (
	// IncidentPodBuggerUIDLabel is the UID of the PodBugger that recorded it.
	IncidentPodBuggerUIDLabel = "debug.deckhand.dev/podbugger-uid"
	// IncidentPodUIDLabel is the UID of the pod that failed.
	IncidentPodUIDLabel = "debug.deckhand.dev/pod-uid"
)

// NotificationAnnotation is the notification a record still owes the sinks
// its PodBugger names (spec.incidents.notify): NotificationOpened, then
// NotificationClosed; a record without it owes none. It is kept on the
// record, not in the manager's memory, so that a new leader delivers what
// the last one had not.
const NotificationAnnotation = "debug.deckhand.dev/notification"

// Notifications a record may owe.
const (
	// NotificationOpened: the record opened (its container started
	// failing).
	NotificationOpened = "opened"
	// NotificationClosed: the summary, once the record's container has not
	// failed for its reason for 10 minutes.
	NotificationClosed = "closed"
)

// Bounds of what a PodIncident copies from the pod, its logs and its Events:
// a tenant writes all of them (its program's output, its pod's messages).
const (
	// MaxIncidentLogTail is the most of a log a record keeps, in bytes.
	MaxIncidentLogTail = 16384
	// MaxIncidentInstances is the most failed instances a record keeps;
	// DefaultIncidentInstances how many it keeps unless its PodBugger says.
	MaxIncidentInstances     = 10
	DefaultIncidentInstances = 5
	// MaxIncidentInstanceLogs bounds the log tails of a record's instances
	// together, in bytes: the oldest instance goes first past it.
	MaxIncidentInstanceLogs = 49152
	// MaxIncidentEvents is how many of the pod's Events a record keeps.
	MaxIncidentEvents = 10
	// MaxIncidentEventMessage bounds each Event's message.
	MaxIncidentEventMessage = 256
	// MaxIncidentMessage bounds the kubelet's and the container's messages.
	MaxIncidentMessage = 1024
)

// ContainerKind is the kind of container that failed.
// +kubebuilder:validation:Enum=Container;InitContainer;Sidecar
type ContainerKind string

// Kinds of containers.
const (
	// ContainerKindContainer is one of the pod's containers.
	ContainerKindContainer ContainerKind = "Container"
	// ContainerKindInit is an init container: the pod's containers wait for
	// it to succeed.
	ContainerKindInit ContainerKind = "InitContainer"
	// ContainerKindSidecar is an init container that keeps running beside
	// the pod's containers (restartPolicy: Always).
	ContainerKindSidecar ContainerKind = "Sidecar"
)

// IncidentReason is what failed.
// +kubebuilder:validation:Enum=Error;OOMKilled;CrashLoopBackOff;NotReady;Evicted
type IncidentReason string

// Incident reasons: the failure triggers of a PodBugger.
const (
	IncidentError            IncidentReason = IncidentReason(TriggerError)
	IncidentOOMKilled        IncidentReason = IncidentReason(TriggerOOMKilled)
	IncidentCrashLoopBackOff IncidentReason = IncidentReason(TriggerCrashLoopBackOff)
	IncidentNotReady         IncidentReason = IncidentReason(TriggerNotReady)
	IncidentEvicted          IncidentReason = IncidentReason(TriggerEvicted)
)

// PodIncidentSpec is what Deckhand caught when a pod failed. Deckhand writes
// it; nobody needs to.
type PodIncidentSpec struct {
	// podBugger names the PodBugger that recorded the incident.
	// +required
	// +kubebuilder:validation:MaxLength=253
	PodBugger string `json:"podBugger"`
	// pod is the pod that failed.
	// +required
	Pod IncidentPod `json:"pod"`
	// container names the container that failed; empty for a pod-level
	// incident (NotReady of a pod without a failing container, Evicted).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Container string `json:"container,omitempty"`
	// containerKind is the kind of container that failed: Container,
	// InitContainer (the pod's containers wait for it to succeed) or Sidecar
	// (an init container that runs beside them); empty with container.
	// +optional
	ContainerKind ContainerKind `json:"containerKind,omitempty"`
	// reason is what failed: Error, OOMKilled, CrashLoopBackOff, NotReady or
	// Evicted.
	// +required
	Reason IncidentReason `json:"reason"`
	// class is what ended the last failure (lastFailure's class), or the
	// pod for an eviction or NotReady.
	// +optional
	Class IncidentClass `json:"class,omitempty"`
	// count is how many failures of this pod, container and reason the
	// record stands for: a crash loop is one record, counting repeats, while
	// each failure follows the last within the backoff window (10 minutes).
	// +required
	// +kubebuilder:validation:Minimum=1
	Count int32 `json:"count"`
	// firstTime is when the first failure counted here happened.
	// +required
	FirstTime metav1.Time `json:"firstTime"`
	// lastTime is when the last failure counted here happened.
	// +required
	LastTime metav1.Time `json:"lastTime"`
	// lastFailure is the failed instance of the container, the latest one
	// counted: what `kubectl describe pod` shows as its Last State until the
	// next crash overwrites it.
	// +optional
	LastFailure *FailedInstance `json:"lastFailure,omitempty"`
	// logTail is the end of the failed instance's log (what `kubectl logs
	// --previous` showed), at most the PodBugger's incidents.logTailBytes.
	// +optional
	// +kubebuilder:validation:MaxLength=16384
	LogTail string `json:"logTail,omitempty"`
	// logTruncated says the log was longer than logTail.
	// +optional
	LogTruncated bool `json:"logTruncated,omitempty"`
	// logError says why no log could be read, if none could.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	LogError string `json:"logError,omitempty"`
	// events are the pod's most recent Events, at most 10, the latest last.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	Events []IncidentEvent `json:"events,omitempty"`
	// node is the pod's node and the pressure it reported.
	// +optional
	Node *IncidentNode `json:"node,omitempty"`
	// resources are the failed container's requests and limits.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// qosClass is the pod's quality of service class.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	QOSClass string `json:"qosClass,omitempty"`
	// debugContainer is the output of the PodBugger's debug container in
	// the pod, when the pod carries it.
	// +optional
	DebugContainer *IncidentDebugContainer `json:"debugContainer,omitempty"`
	// instances are the failed instances counted here, oldest first: the
	// last incidents.instances of them (5 unless the PodBugger says, at
	// most 10), each with the log it left, read while the kubelet still
	// held it (the kubelet keeps one dead instance per container: an
	// instance whose log was not read before the next crash says so in its
	// logError). The oldest goes first when one more comes, and when their
	// log tails together would pass 48 KiB. The last is lastFailure with
	// logTail.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	Instances []IncidentInstance `json:"instances,omitempty"`
}

// IncidentInstance is one failed instance of a container and the log it
// left.
type IncidentInstance struct {
	FailedInstance `json:",inline"`
	// logTail is the end of the instance's log.
	// +optional
	// +kubebuilder:validation:MaxLength=16384
	LogTail string `json:"logTail,omitempty"`
	// logTruncated says the log was longer than logTail.
	// +optional
	LogTruncated bool `json:"logTruncated,omitempty"`
	// logError says why no log could be read, if none could.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	LogError string `json:"logError,omitempty"`
	// artifacts are the files the instance left in its PodBugger's
	// incidents.artifacts volume (written between its start and its end),
	// as the debug container collected them: at most 16.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Artifacts []IncidentArtifact `json:"artifacts,omitempty"`
	// artifactsError says why the instance's artifacts were not (all)
	// listed.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	ArtifactsError string `json:"artifactsError,omitempty"`
}

// IncidentArtifact is one file a failed instance left in its artifacts
// volume.
type IncidentArtifact struct {
	// name is the file's path in the volume.
	// +required
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`
	// size is the file's size in bytes when it was collected.
	// +required
	// +kubebuilder:validation:Minimum=0
	Size int64 `json:"size"`
	// sha256 is the SHA-256 of the bytes collected: the whole file, or its
	// first maxFileBytes when truncated. Empty when nothing was read (the
	// file was unreadable, or the collection's maxBytes was spent).
	// +optional
	// +kubebuilder:validation:Pattern=`^([a-f0-9]{64})?$`
	SHA256 string `json:"sha256,omitempty"`
	// truncated says fewer bytes than size were hashed (and copied).
	// +optional
	Truncated bool `json:"truncated,omitempty"`
	// copy is where the collected bytes are kept in the same volume
	// (.deckhand/<time>/<name>), until keep later collections remove them;
	// empty when none were copied.
	// +optional
	// +kubebuilder:validation:MaxLength=320
	Copy string `json:"copy,omitempty"`
	// error says why the file was not read, if it was not.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Error string `json:"error,omitempty"`
}

// IncidentPod identifies the pod that failed.
type IncidentPod struct {
	// name is the pod's name.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// uid is the pod's UID: a new pod of the same name is another pod.
	// +required
	// +kubebuilder:validation:MaxLength=64
	UID string `json:"uid"`
	// phase is the pod's phase when the failure was recorded.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Phase string `json:"phase,omitempty"`
	// message is the pod's status message (an eviction's, for example).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// FailedInstance is one terminated instance of a container.
type FailedInstance struct {
	// exitCode is the instance's exit status.
	// +optional
	ExitCode int32 `json:"exitCode"`
	// signal is the signal that ended it, if the runtime reports one.
	// +optional
	Signal int32 `json:"signal,omitempty"`
	// reason is the kubelet's reason: Error, OOMKilled, ...
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Reason string `json:"reason,omitempty"`
	// message is the container's termination message, cut to 1024 bytes.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// startedAt is when the instance started.
	// +optional
	StartedAt metav1.Time `json:"startedAt,omitempty"`
	// finishedAt is when it ended, as the kubelet reports.
	// +optional
	FinishedAt metav1.Time `json:"finishedAt,omitempty"`
	// containerID is the runtime's ID of the instance.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	ContainerID string `json:"containerID,omitempty"`
	// restartCount is the container's restart count when it was recorded.
	// +optional
	RestartCount int32 `json:"restartCount,omitempty"`
	// class is what ended the instance, as far as its status and its pod's
	// Events tell (docs/guides/podbugger.md has the table).
	// +optional
	Class IncidentClass `json:"class,omitempty"`
	// explanation says the class in a sentence: the signal's name, the
	// probe that failed, the code the program chose.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Explanation string `json:"explanation,omitempty"`
}

// IncidentClass is what ended a failed instance, or a pod.
// +kubebuilder:validation:Enum=ExitCode;Signal;OOMKilled;OOMKilledChild;ProbeFailed;StartError;NodePressure;LimitExceeded;EvictionAPI;NotReady;Unknown
type IncidentClass string

// Classes of a failure.
const (
	// ClassExitCode: the program exited with a non-zero code of its own
	// choosing (1 to 128).
	ClassExitCode IncidentClass = "ExitCode"
	// ClassSignal: a signal ended it (a crash such as SIGSEGV or SIGABRT,
	// or a SIGKILL or SIGTERM from outside the container), not its memory
	// limit and not a probe.
	ClassSignal IncidentClass = "Signal"
	// ClassOOMKilled: the kernel killed the container's main process for
	// the container's memory limit (exit 137).
	ClassOOMKilled IncidentClass = "OOMKilled"
	// ClassOOMKilledChild: the kernel killed another process of the
	// container for its memory limit; the main process went on and exited
	// by itself (the kubelet still says OOMKilled).
	ClassOOMKilledChild IncidentClass = "OOMKilledChild"
	// ClassProbeFailed: its kubelet killed it because its liveness or
	// startup probe failed.
	ClassProbeFailed IncidentClass = "ProbeFailed"
	// ClassStartError: the container could not start (its command not
	// found, a mount refused).
	ClassStartError IncidentClass = "StartError"
	// ClassNodePressure: its kubelet evicted the pod because the node ran
	// low on memory, disk or PIDs.
	ClassNodePressure IncidentClass = "NodePressure"
	// ClassLimitExceeded: its kubelet evicted the pod for using more
	// ephemeral storage than its limits.
	ClassLimitExceeded IncidentClass = "LimitExceeded"
	// ClassEvictionAPI: the pod was evicted through the eviction API (a
	// drain, a descheduler).
	ClassEvictionAPI IncidentClass = "EvictionAPI"
	// ClassNotReady: the pod stayed not Ready beyond notReadyAfter.
	ClassNotReady IncidentClass = "NotReady"
	// ClassUnknown: none of the above can be told.
	ClassUnknown IncidentClass = "Unknown"
)

// IncidentEvent is one Event of the pod.
type IncidentEvent struct {
	// time is when it last happened.
	// +optional
	Time metav1.Time `json:"time,omitempty"`
	// type is Normal or Warning.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Type string `json:"type,omitempty"`
	// reason is the Event's reason.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Reason string `json:"reason,omitempty"`
	// message is the Event's message, cut to 256 bytes.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Message string `json:"message,omitempty"`
	// count is how often it happened.
	// +optional
	Count int32 `json:"count,omitempty"`
}

// IncidentNode is the pod's node when it failed.
type IncidentNode struct {
	// name is the node's name.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// pressure lists the node's pressure conditions that were True
	// (MemoryPressure, DiskPressure, PIDPressure) and NotReady when its
	// Ready condition was not True; empty when it reported none.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=64
	Pressure []string `json:"pressure,omitempty"`
	// error says why the node could not be read, if it could not.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Error string `json:"error,omitempty"`
}

// IncidentDebugContainer is the output of the PodBugger's debug container.
type IncidentDebugContainer struct {
	// name is the ephemeral container's name.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// logTail is the end of its log, at most incidents.logTailBytes.
	// +optional
	// +kubebuilder:validation:MaxLength=16384
	LogTail string `json:"logTail,omitempty"`
}

// PodIncident records one failure of a pod (or a run of repeats of it),
// caught by a PodBugger the moment it happened: what the next restart, the
// expiry of Events and the rotation of logs would erase. It is owned by the
// PodBugger, which keeps at most incidents.maxRecords of them, each for
// incidents.maxAge after its last failure.
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=pinc,categories=deckhand
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=`.spec.pod.name`
// +kubebuilder:printcolumn:name="Container",type=string,JSONPath=`.spec.container`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.spec.reason`
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.spec.class`
// +kubebuilder:printcolumn:name="Exit",type=integer,JSONPath=`.spec.lastFailure.exitCode`
// +kubebuilder:printcolumn:name="Count",type=integer,JSONPath=`.spec.count`
// +kubebuilder:printcolumn:name="Last",type=date,JSONPath=`.spec.lastTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PodIncident struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what was caught.
	// +required
	Spec PodIncidentSpec `json:"spec"`
}

// PodIncidentList is a list of PodIncidents.
// +kubebuilder:object:root=true
type PodIncidentList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the PodIncidents.
	Items []PodIncident `json:"items"`
}
