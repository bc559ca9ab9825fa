package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Size names a resource preset for the application container.
// +kubebuilder:validation:Enum=small;medium;large;custom
type Size string

// The presets. Their requests and limits are documented on ModelBoxSpec.Size.
const (
	SizeSmall  Size = "small"
	SizeMedium Size = "medium"
	SizeLarge  Size = "large"
	SizeCustom Size = "custom"
)

// ModelBoxSpec is what the user asks for: one application container, how many
// copies, and how it is reached.
//
// +kubebuilder:validation:XValidation:rule="!has(self.size) || self.size != 'custom' || has(self.resources)",message="resources is required when size is custom",fieldPath=".resources"
// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.size) || self.size == 'custom'",message="resources can only be given with size custom (or without size): the presets small, medium and large set them",fieldPath=".resources"
// +kubebuilder:validation:XValidation:rule="!has(self.serviceType) || self.serviceType != 'ClusterIP' || !has(self.ports) || self.ports.all(p, !has(p.nodePort))",message="nodePort needs serviceType NodePort or LoadBalancer, not ClusterIP",fieldPath=".ports"
// +kubebuilder:validation:XValidation:rule="!has(self.replicas) || !has(self.autoscaling)",message="replicas cannot be set together with autoscaling: the HorizontalPodAutoscaler owns the replica count",fieldPath=".replicas"
type ModelBoxSpec struct {
	// name is the application container's name. Defaults to the ModelBox's
	// name.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name,omitempty"`

	// image is the application container's image, e.g. nginx:1.7.9.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image"`

	// replicas is how many pods run. Defaults to 1. Cannot be set together
	// with autoscaling, which then decides the count.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`

	// ports the application listens on. Each becomes a port of the
	// application container and of the Service. Ports are unique by port and
	// protocol, names are unique, and with more than one port every port needs
	// a name.
	// +optional
	// +listType=map
	// +listMapKey=port
	// +listMapKey=protocol
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="size(self) < 2 || self.all(p, has(p.name))",message="every port needs a name when there is more than one port"
	// +kubebuilder:validation:XValidation:rule="self.all(p, !has(p.name) || self.exists_one(q, has(q.name) && q.name == p.name))",message="port names must be unique"
	// +kubebuilder:validation:XValidation:rule="self.all(p, !has(p.nodePort) || self.exists_one(q, has(q.nodePort) && q.nodePort == p.nodePort && q.protocol == p.protocol))",message="nodePorts must be unique per protocol"
	Ports []ServicePort `json:"ports,omitempty"`

	// size is a resource preset for the application container:
	//
	//	small:  requests cpu 100m, memory 128Mi; limits cpu 500m, memory 256Mi
	//	medium: requests cpu 250m, memory 512Mi; limits cpu 1,    memory 1Gi
	//	large:  requests cpu 1,    memory 2Gi;   limits cpu 2,    memory 4Gi
	//	custom: exactly the given resources (then required)
	//
	// Without size, resources are used as given, and a ModelBox that gives
	// neither gets small.
	// +optional
	Size Size `json:"size,omitempty"`

	// resources of the application container. Required with size custom,
	// refused with the other presets.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// envs are the application container's environment variables.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=256
	Envs []corev1.EnvVar `json:"envs,omitempty"`

	// rollingUpdate is how far a rollout may go above and below the desired
	// number of pods at once (the Deployment's maxSurge and maxUnavailable):
	// a count like 1 or a percentage like "30%". Defaults to the Deployment's
	// 25%.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self > 0 : self.matches('^[0-9]+%$') && int(self.replace('%', '')) > 0 && int(self.replace('%', '')) <= 100",message="must be a positive count such as 1 or a percentage from 1% to 100% such as \"30%\""
	RollingUpdate *intstr.IntOrString `json:"rollingUpdate,omitempty"`

	// serviceType is the Service's type: ClusterIP, NodePort or LoadBalancer.
	// Defaults to NodePort when a port sets nodePort, ClusterIP otherwise.
	// +optional
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	ServiceType corev1.ServiceType `json:"serviceType,omitempty"`

	// initContainers run to completion, in order, before the application
	// starts. A native sidecar is an init container with restartPolicy Always.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	InitContainers []corev1.Container `json:"initContainers,omitempty"`

	// sidecars are containers that run beside the application container in
	// every pod.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Sidecars []corev1.Container `json:"sidecars,omitempty"`

	// probes of the application container. By default a TCP readiness probe
	// and a TCP liveness probe check the first port; each given probe replaces
	// its default, and disabled turns them all off.
	// +optional
	Probes *Probes `json:"probes,omitempty"`

	// autoscaling makes a HorizontalPodAutoscaler scale the pods between
	// minReplicas and maxReplicas on CPU use. The autoscaler then owns the
	// replica count: Deckhand leaves it alone.
	// +optional
	Autoscaling *Autoscaling `json:"autoscaling,omitempty"`
}

// ServicePort is one port the application listens on.
type ServicePort struct {
	// name of the port, used by both the container and the Service: up to 15
	// lower-case letters, digits and '-', with at least one letter.
	// +optional
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self.matches('[a-z]') && !self.contains('--')",message="must contain a letter and no '--'"
	Name string `json:"name,omitempty"`

	// protocol is TCP, UDP or SCTP. Defaults to TCP.
	// +optional
	// +kubebuilder:default=TCP
	// +kubebuilder:validation:Enum=TCP;UDP;SCTP
	Protocol corev1.Protocol `json:"protocol,omitempty"`

	// appProtocol is the application protocol (e.g. http, kubernetes.io/h2c),
	// a hint for load balancers and meshes.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	AppProtocol *string `json:"appProtocol,omitempty"`

	// port the Service exposes.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`

	// targetPort is the container port traffic goes to. Defaults to port.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	TargetPort int32 `json:"targetPort,omitempty"`

	// nodePort is the port on every node, with serviceType NodePort or
	// LoadBalancer, within the default node-port range 30000-32767. Left out,
	// Kubernetes picks one.
	// +optional
	// +kubebuilder:validation:Minimum=30000
	// +kubebuilder:validation:Maximum=32767
	NodePort int32 `json:"nodePort,omitempty"`
}

// Probes are the application container's probes.
// +kubebuilder:validation:XValidation:rule="!has(self.disabled) || !self.disabled || !(has(self.readiness) || has(self.liveness) || has(self.startup))",message="disabled turns every probe off: give no readiness, liveness or startup probe with it"
type Probes struct {
	// disabled turns every probe off, the defaults included.
	// +optional
	Disabled bool `json:"disabled,omitempty"`

	// readiness replaces the default TCP readiness probe on the first port.
	// +optional
	Readiness *corev1.Probe `json:"readiness,omitempty"`

	// liveness replaces the default TCP liveness probe on the first port.
	// +optional
	Liveness *corev1.Probe `json:"liveness,omitempty"`

	// startup holds the other probes back until it succeeds. No default.
	// +optional
	Startup *corev1.Probe `json:"startup,omitempty"`
}

// Autoscaling is how a HorizontalPodAutoscaler scales the pods.
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",message="minReplicas must not exceed maxReplicas",fieldPath=".minReplicas"
type Autoscaling struct {
	// minReplicas is the fewest pods. Defaults to 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MinReplicas *int32 `json:"minReplicas,omitempty"`

	// maxReplicas is the most pods.
	// +required
	// +kubebuilder:validation:Minimum=1
	MaxReplicas int32 `json:"maxReplicas"`

	// targetCPUUtilizationPercentage is the average CPU use, as a percentage
	// of the requested CPU, the autoscaler aims for. Defaults to 80.
	// +optional
	// +kubebuilder:validation:Minimum=1
	TargetCPUUtilizationPercentage *int32 `json:"targetCPUUtilizationPercentage,omitempty"`
}

// Condition types of a ModelBox.
const (
	// ConditionAvailable is True when the Service exists and the Deployment
	// has its minimum number of pods available.
	ConditionAvailable = "Available"
	// ConditionProgressing is True while a rollout or a scale is under way.
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True when Deckhand cannot make the children match
	// the spec, or the rollout is stuck.
	ConditionDegraded = "Degraded"
)

// Condition reasons of a ModelBox.
const (
	ReasonMinimumReplicasAvailable = "MinimumReplicasAvailable"
	ReasonReplicasUnavailable      = "ReplicasUnavailable"
	ReasonServiceMissing           = "ServiceMissing"
	ReasonDeploymentMissing        = "DeploymentMissing"
	ReasonRollingOut               = "RollingOut"
	ReasonRolloutComplete          = "RolloutComplete"
	ReasonAsExpected               = "AsExpected"
	ReasonApplyFailed              = "ApplyFailed"
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	ReasonReplicaFailure           = "ReplicaFailure"
)

// NodePort is a node port the Service was given.
type NodePort struct {
	// name of the Service port.
	// +optional
	Name string `json:"name,omitempty"`
	// port of the Service.
	// +required
	Port int32 `json:"port"`
	// nodePort open on every node.
	// +required
	NodePort int32 `json:"nodePort"`
}

// ModelBoxStatus is what Deckhand observed of the ModelBox's children.
type ModelBoxStatus struct {
	// observedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// replicas is how many pods the Deployment has.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// readyReplicas is how many pods are ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// updatedReplicas is how many pods run the current spec.
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas,omitempty"`
	// availableReplicas is how many pods have been ready long enough to count.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas,omitempty"`

	// serviceName is the Service in front of the pods.
	// +optional
	ServiceName string `json:"serviceName,omitempty"`
	// serviceType is the Service's type.
	// +optional
	ServiceType corev1.ServiceType `json:"serviceType,omitempty"`
	// clusterIP is the Service's cluster IP.
	// +optional
	ClusterIP string `json:"clusterIP,omitempty"`
	// nodePorts are the Service's node ports.
	// +optional
	// +listType=atomic
	NodePorts []NodePort `json:"nodePorts,omitempty"`

	// conditions are Available, Progressing and Degraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ModelBox runs one container image as a well-configured application: a
// Deployment with resources, probes and rolling updates, a Service, and
// optionally a HorizontalPodAutoscaler and a PodDisruptionBudget.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mb,categories=deckhand
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.replicas`
// +kubebuilder:printcolumn:name="Service-Type",type=string,JSONPath=`.status.serviceType`
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="!has(self.spec.sidecars) || self.spec.sidecars.all(c, c.name != (has(self.spec.name) ? self.spec.name : self.metadata.name))",message="a sidecar cannot take the application container's name (spec.name, or else the ModelBox's name)",fieldPath=".spec.sidecars"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.initContainers) || self.spec.initContainers.all(c, c.name != (has(self.spec.name) ? self.spec.name : self.metadata.name))",message="an init container cannot take the application container's name (spec.name, or else the ModelBox's name)",fieldPath=".spec.initContainers"
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name names the Service, so it must be a DNS-1035 label: up to 63 lower-case letters, digits and '-', starting with a letter"
type ModelBox struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired application.
	// +required
	Spec ModelBoxSpec `json:"spec"`

	// status is what Deckhand observed.
	// +optional
	Status ModelBoxStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ModelBoxList is a list of ModelBoxes.
type ModelBoxList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ModelBox `json:"items"`
}
