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
// +kubebuilder:validation:XValidation:rule="!has(self.serviceType) || (has(self.ports) && size(self.ports) > 0)",message="serviceType needs ports: a ModelBox without ports gets no Service",fieldPath=".serviceType"
// +kubebuilder:validation:XValidation:rule="!has(self.probes) || !has(self.probes.readiness) || ((!has(self.probes.readiness.httpGet) || type(self.probes.readiness.httpGet.port) == int || (has(self.ports) && self.ports.exists(p, has(p.name) && p.name == self.probes.readiness.httpGet.port && (!has(p.targetPort) || type(p.targetPort) == int)))) && (!has(self.probes.readiness.tcpSocket) || type(self.probes.readiness.tcpSocket.port) == int || (has(self.ports) && self.ports.exists(p, has(p.name) && p.name == self.probes.readiness.tcpSocket.port && (!has(p.targetPort) || type(p.targetPort) == int)))))",message="a named probe port must be the name of a port in spec.ports with a numeric targetPort: the application container has no other named ports",fieldPath=".probes.readiness"
// +kubebuilder:validation:XValidation:rule="!has(self.probes) || !has(self.probes.liveness) || ((!has(self.probes.liveness.httpGet) || type(self.probes.liveness.httpGet.port) == int || (has(self.ports) && self.ports.exists(p, has(p.name) && p.name == self.probes.liveness.httpGet.port && (!has(p.targetPort) || type(p.targetPort) == int)))) && (!has(self.probes.liveness.tcpSocket) || type(self.probes.liveness.tcpSocket.port) == int || (has(self.ports) && self.ports.exists(p, has(p.name) && p.name == self.probes.liveness.tcpSocket.port && (!has(p.targetPort) || type(p.targetPort) == int)))))",message="a named probe port must be the name of a port in spec.ports with a numeric targetPort: the application container has no other named ports",fieldPath=".probes.liveness"
// +kubebuilder:validation:XValidation:rule="!has(self.probes) || !has(self.probes.startup) || ((!has(self.probes.startup.httpGet) || type(self.probes.startup.httpGet.port) == int || (has(self.ports) && self.ports.exists(p, has(p.name) && p.name == self.probes.startup.httpGet.port && (!has(p.targetPort) || type(p.targetPort) == int)))) && (!has(self.probes.startup.tcpSocket) || type(self.probes.startup.tcpSocket.port) == int || (has(self.ports) && self.ports.exists(p, has(p.name) && p.name == self.probes.startup.tcpSocket.port && (!has(p.targetPort) || type(p.targetPort) == int)))))",message="a named probe port must be the name of a port in spec.ports with a numeric targetPort: the application container has no other named ports",fieldPath=".probes.startup"
type ModelBoxSpec struct {
	// name is the application container's name. Defaults to the ModelBox's
	// name.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name,omitempty"`

	// image is the application container's image, e.g. nginx:1.28.0.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image"`

	// replicas is how many pods run; Deckhand keeps the Deployment at it.
	// Left out, a new ModelBox starts with one pod (or autoscaling's
	// minReplicas) and Deckhand leaves the count to whoever scales the
	// Deployment: turning autoscaling off keeps the count the autoscaler left.
	// Cannot be set together with autoscaling, which then decides the count.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`

	// minReadySeconds is how long a new pod must be ready before it counts as
	// available, and the rollout goes on. Defaults to 3.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	MinReadySeconds *int32 `json:"minReadySeconds,omitempty"`

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
	// +kubebuilder:validation:XValidation:rule="self.all(p, !has(p.targetPort) || type(p.targetPort) == int || self.exists(q, has(q.name) && q.name == p.targetPort && (!has(q.targetPort) || type(q.targetPort) == int) && q.protocol == p.protocol))",message="a named targetPort must be the name of another port here with a numeric targetPort and the same protocol: the application container's ports are named after those"
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
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || !has(self.limits) || ((!('cpu' in self.requests) || !('cpu' in self.limits) || quantity(string(self.requests['cpu'])).compareTo(quantity(string(self.limits['cpu']))) <= 0) && (!('memory' in self.requests) || !('memory' in self.limits) || quantity(string(self.requests['memory'])).compareTo(quantity(string(self.limits['memory']))) <= 0))",message="a cpu or memory request cannot exceed its limit"
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// envs are the application container's environment variables.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:XValidation:rule="self.all(e, size(e.name) > 0)",message="env names cannot be empty"
	// +kubebuilder:validation:XValidation:rule="self.all(e, !has(e.valueFrom) || ((!has(e.value) || size(e.value) == 0) && [has(e.valueFrom.fieldRef), has(e.valueFrom.resourceFieldRef), has(e.valueFrom.configMapKeyRef), has(e.valueFrom.secretKeyRef), has(e.valueFrom.fileKeyRef)].filter(x, x).size() == 1))",message="an env with valueFrom has no value and exactly one of fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef or fileKeyRef"
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
	// +kubebuilder:validation:XValidation:rule="self.all(c, has(c.image) && size(c.image) > 0)",message="every container needs an image"
	// +kubebuilder:validation:XValidation:rule="self.all(c, !has(c.volumeMounts) && !has(c.volumeDevices))",message="a ModelBox's pods have no volumes: containers cannot mount any"
	InitContainers []corev1.Container `json:"initContainers,omitempty"`

	// sidecars are containers that run beside the application container in
	// every pod.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(c, has(c.image) && size(c.image) > 0)",message="every container needs an image"
	// +kubebuilder:validation:XValidation:rule="self.all(c, !has(c.volumeMounts) && !has(c.volumeDevices))",message="a ModelBox's pods have no volumes: containers cannot mount any"
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
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	AppProtocol *string `json:"appProtocol,omitempty"`

	// port the Service exposes.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`

	// targetPort is the container port traffic goes to: a number (the
	// application container then listens on it), or the name of another port
	// of spec.ports, as in a Kubernetes ServicePort. Defaults to port.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 && self <= 65535 : size(self) <= 15 && self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && self.matches('[a-z]') && !self.contains('--')",message="must be a port number from 1 to 65535 or a port name (up to 15 lower-case letters, digits and '-', with a letter)"
	TargetPort *intstr.IntOrString `json:"targetPort,omitempty"`

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
	// +kubebuilder:validation:XValidation:rule="[has(self.exec), has(self.httpGet), has(self.tcpSocket), has(self.grpc)].filter(x, x).size() == 1",message="a probe needs exactly one of exec, httpGet, tcpSocket or grpc"
	// +kubebuilder:validation:XValidation:rule="(!has(self.httpGet) || type(self.httpGet.port) != int || (self.httpGet.port >= 1 && self.httpGet.port <= 65535)) && (!has(self.tcpSocket) || type(self.tcpSocket.port) != int || (self.tcpSocket.port >= 1 && self.tcpSocket.port <= 65535)) && (!has(self.grpc) || (self.grpc.port >= 1 && self.grpc.port <= 65535))",message="probe ports are from 1 to 65535"
	// +kubebuilder:validation:XValidation:rule="(!has(self.initialDelaySeconds) || self.initialDelaySeconds >= 0) && (!has(self.timeoutSeconds) || self.timeoutSeconds >= 0) && (!has(self.periodSeconds) || self.periodSeconds >= 0) && (!has(self.successThreshold) || self.successThreshold >= 0) && (!has(self.failureThreshold) || self.failureThreshold >= 0) && (!has(self.terminationGracePeriodSeconds) || self.terminationGracePeriodSeconds > 0)",message="probe times and thresholds cannot be negative (terminationGracePeriodSeconds must be positive)"
	Readiness *corev1.Probe `json:"readiness,omitempty"`

	// liveness replaces the default TCP liveness probe on the first port.
	// +optional
	// +kubebuilder:validation:XValidation:rule="[has(self.exec), has(self.httpGet), has(self.tcpSocket), has(self.grpc)].filter(x, x).size() == 1",message="a probe needs exactly one of exec, httpGet, tcpSocket or grpc"
	// +kubebuilder:validation:XValidation:rule="(!has(self.httpGet) || type(self.httpGet.port) != int || (self.httpGet.port >= 1 && self.httpGet.port <= 65535)) && (!has(self.tcpSocket) || type(self.tcpSocket.port) != int || (self.tcpSocket.port >= 1 && self.tcpSocket.port <= 65535)) && (!has(self.grpc) || (self.grpc.port >= 1 && self.grpc.port <= 65535))",message="probe ports are from 1 to 65535"
	// +kubebuilder:validation:XValidation:rule="(!has(self.initialDelaySeconds) || self.initialDelaySeconds >= 0) && (!has(self.timeoutSeconds) || self.timeoutSeconds >= 0) && (!has(self.periodSeconds) || self.periodSeconds >= 0) && (!has(self.successThreshold) || self.successThreshold >= 0) && (!has(self.failureThreshold) || self.failureThreshold >= 0) && (!has(self.terminationGracePeriodSeconds) || self.terminationGracePeriodSeconds > 0)",message="probe times and thresholds cannot be negative (terminationGracePeriodSeconds must be positive)"
	// +kubebuilder:validation:XValidation:rule="!has(self.successThreshold) || self.successThreshold == 1",message="successThreshold must be 1 for this probe"
	Liveness *corev1.Probe `json:"liveness,omitempty"`

	// startup holds the other probes back until it succeeds. No default.
	// +optional
	// +kubebuilder:validation:XValidation:rule="[has(self.exec), has(self.httpGet), has(self.tcpSocket), has(self.grpc)].filter(x, x).size() == 1",message="a probe needs exactly one of exec, httpGet, tcpSocket or grpc"
	// +kubebuilder:validation:XValidation:rule="(!has(self.httpGet) || type(self.httpGet.port) != int || (self.httpGet.port >= 1 && self.httpGet.port <= 65535)) && (!has(self.tcpSocket) || type(self.tcpSocket.port) != int || (self.tcpSocket.port >= 1 && self.tcpSocket.port <= 65535)) && (!has(self.grpc) || (self.grpc.port >= 1 && self.grpc.port <= 65535))",message="probe ports are from 1 to 65535"
	// +kubebuilder:validation:XValidation:rule="(!has(self.initialDelaySeconds) || self.initialDelaySeconds >= 0) && (!has(self.timeoutSeconds) || self.timeoutSeconds >= 0) && (!has(self.periodSeconds) || self.periodSeconds >= 0) && (!has(self.successThreshold) || self.successThreshold >= 0) && (!has(self.failureThreshold) || self.failureThreshold >= 0) && (!has(self.terminationGracePeriodSeconds) || self.terminationGracePeriodSeconds > 0)",message="probe times and thresholds cannot be negative (terminationGracePeriodSeconds must be positive)"
	// +kubebuilder:validation:XValidation:rule="!has(self.successThreshold) || self.successThreshold == 1",message="successThreshold must be 1 for this probe"
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
	// ReasonMinimumReplicasAvailable: Available: the Deployment has its minimum of pods available.
	ReasonMinimumReplicasAvailable = "MinimumReplicasAvailable"
	// ReasonReplicasUnavailable: Available is False: fewer pods are available than the Deployment needs.
	ReasonReplicasUnavailable = "ReplicasUnavailable"
	// ReasonServiceMissing: Available is False: the ModelBox has ports and its Service does not exist yet.
	ReasonServiceMissing = "ServiceMissing"
	// ReasonDeploymentMissing: Available is False: the Deployment does not exist yet.
	ReasonDeploymentMissing = "DeploymentMissing"
	// ReasonRollingOut: Progressing: the Deployment is being created, or pods are being updated, added or removed.
	ReasonRollingOut = "RollingOut"
	// ReasonRolloutComplete: Progressing is False: every pod runs the current template and is available.
	ReasonRolloutComplete = "RolloutComplete"
	// ReasonAsExpected: Degraded is False: the children match the spec.
	ReasonAsExpected = "AsExpected"
	// ReasonApplyFailed: Degraded: writing a child failed (the message says which and why).
	ReasonApplyFailed = "ApplyFailed"
	// ReasonProgressDeadlineExceeded: Degraded: the Deployment's rollout passed its progress deadline.
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	// ReasonReplicaFailure: Degraded: the Deployment cannot create or delete pods (a quota, an admission webhook).
	ReasonReplicaFailure = "ReplicaFailure"
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
