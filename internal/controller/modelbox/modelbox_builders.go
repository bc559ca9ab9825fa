package modelbox

import (
	"encoding/json"
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	autoscalingv2ac "k8s.io/client-go/applyconfigurations/autoscaling/v2"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	"k8s.io/utils/ptr"

	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
)

// Labels Deckhand puts on every child and pod of a ModelBox.
const (
	// LabelModelBox selects a ModelBox's pods and marks its children; its
	// value is the ModelBox's name.
	LabelModelBox = "model.deckhand.dev/modelbox"
	labelName     = "app.kubernetes.io/name"
	labelManager  = "app.kubernetes.io/managed-by"
)

// presets are the requests and limits of the sizes small, medium and large,
// as documented on ModelBoxSpec.Size.
var presets = map[modelv1.Size]corev1.ResourceRequirements{
	modelv1.SizeSmall:  requirements("100m", "128Mi", "500m", "256Mi"),
	modelv1.SizeMedium: requirements("250m", "512Mi", "1", "1Gi"),
	modelv1.SizeLarge:  requirements("1", "2Gi", "2", "4Gi"),
}

func requirements(reqCPU, reqMem, limCPU, limMem string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(reqCPU), corev1.ResourceMemory: resource.MustParse(reqMem)},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(limCPU), corev1.ResourceMemory: resource.MustParse(limMem)},
	}
}

// desired holds the children a ModelBox should have; nil means the child
// must not exist.
type desired struct {
	deployment *appsv1ac.DeploymentApplyConfiguration
	service    *corev1ac.ServiceApplyConfiguration
	hpa        *autoscalingv2ac.HorizontalPodAutoscalerApplyConfiguration
	pdb        *policyv1ac.PodDisruptionBudgetApplyConfiguration
}

// defaultMinReadySeconds is the Deployment's minReadySeconds when the spec
// gives none: the seed's value.
const defaultMinReadySeconds = 3

// desiredFor builds every child of box. current is the Deployment's replica
// count (nil when it does not exist yet).
func desiredFor(box *modelv1.ModelBox, current *int32) (desired, error) {
	deploy, err := deploymentFor(box)
	if err != nil {
		return desired{}, err
	}
	return desired{deployment: deploy, service: serviceFor(box), hpa: hpaFor(box), pdb: pdbFor(box, current)}, nil
}

// deploymentFor is the Deployment that runs box's pods. Replicas are only
// set when spec.replicas is: otherwise the count belongs to whoever scales
// the Deployment (the HorizontalPodAutoscaler, or the count it left).
func deploymentFor(box *modelv1.ModelBox) (*appsv1ac.DeploymentApplyConfiguration, error) {
	pod, err := podSpecFor(box)
	if err != nil {
		return nil, err
	}
	spec := appsv1ac.DeploymentSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorFor(box))).
		WithMinReadySeconds(ptr.Deref(box.Spec.MinReadySeconds, defaultMinReadySeconds)).
		WithTemplate(corev1ac.PodTemplateSpec().WithLabels(labelsFor(box)).WithSpec(pod))
	if box.Spec.Replicas != nil {
		spec.WithReplicas(*box.Spec.Replicas)
	}
	if ru := box.Spec.RollingUpdate; ru != nil {
		spec.WithStrategy(appsv1ac.DeploymentStrategy().
			WithType("RollingUpdate").
			WithRollingUpdate(appsv1ac.RollingUpdateDeployment().WithMaxSurge(*ru).WithMaxUnavailable(*ru)))
	}
	return appsv1ac.Deployment(box.Name, box.Namespace).
		WithLabels(labelsFor(box)).
		WithOwnerReferences(ownerFor(box)).
		WithSpec(spec), nil
}

func podSpecFor(box *modelv1.ModelBox) (*corev1ac.PodSpecApplyConfiguration, error) {
	app, err := appContainerFor(box)
	if err != nil {
		return nil, err
	}
	pod := corev1ac.PodSpec()
	for i := range box.Spec.InitContainers {
		c, err := containerFrom(&box.Spec.InitContainers[i])
		if err != nil {
			return nil, fmt.Errorf("spec.initContainers[%d]: %w", i, err)
		}
		pod.WithInitContainers(c)
	}
	pod.WithContainers(app)
	for i := range box.Spec.Sidecars {
		c, err := containerFrom(&box.Spec.Sidecars[i])
		if err != nil {
			return nil, fmt.Errorf("spec.sidecars[%d]: %w", i, err)
		}
		pod.WithContainers(c)
	}
	return pod, nil
}

// containerFrom is a user-given container as an apply configuration. An
// empty resources, which JSON always carries, is left out: Deckhand does not
// claim a field it has nothing to say about.
func containerFrom(c *corev1.Container) (*corev1ac.ContainerApplyConfiguration, error) {
	ac, err := convert[corev1ac.ContainerApplyConfiguration](c)
	if err != nil {
		return nil, err
	}
	if r := ac.Resources; r != nil && r.Requests == nil && r.Limits == nil && r.Claims == nil {
		ac.Resources = nil
	}
	return ac, nil
}

// appContainerFor is the container that runs spec.image.
func appContainerFor(box *modelv1.ModelBox) (*corev1ac.ContainerApplyConfiguration, error) {
	c := corev1ac.Container().WithName(containerName(box)).WithImage(box.Spec.Image)
	ports, err := appPortsFor(box)
	if err != nil {
		return nil, err
	}
	c.WithPorts(ports...)
	for i := range box.Spec.Envs {
		e, err := convert[corev1ac.EnvVarApplyConfiguration](&box.Spec.Envs[i])
		if err != nil {
			return nil, fmt.Errorf("spec.envs[%d]: %w", i, err)
		}
		c.WithEnv(e)
	}
	res, err := convert[corev1ac.ResourceRequirementsApplyConfiguration](resourcesOf(box))
	if err != nil {
		return nil, fmt.Errorf("spec.resources: %w", err)
	}
	if res.Requests != nil || res.Limits != nil || res.Claims != nil {
		c.WithResources(res)
	}
	readiness, liveness, startup, err := probesFor(box)
	if err != nil {
		return nil, err
	}
	c.ReadinessProbe, c.LivenessProbe, c.StartupProbe = readiness, liveness, startup
	return c, nil
}

// appPortsFor is the application container's ports: one per container
// port number and protocol that spec.ports leads to. Two Service ports may
// lead to the same container port, which can carry only one name: the one a
// named targetPort or probe port refers to, or else the first one's.
func appPortsFor(box *modelv1.ModelBox) ([]*corev1ac.ContainerPortApplyConfiguration, error) {
	referenced := referencedPortNames(box)
	var ports []*corev1ac.ContainerPortApplyConfiguration
	namedBy := map[corev1.ContainerPort]int{} // container port -> index in spec.ports of its name
	for i, p := range box.Spec.Ports {
		if isNamed(p.TargetPort) {
			continue // leads to the container port of another entry
		}
		key := corev1.ContainerPort{ContainerPort: containerPortOf(box, p), Protocol: protocolOf(p)}
		j, seen := namedBy[key]
		switch {
		case !seen:
			namedBy[key] = i
			cp := corev1ac.ContainerPort().WithContainerPort(key.ContainerPort).WithProtocol(key.Protocol)
			if p.Name != "" {
				cp.WithName(p.Name)
			}
			ports = append(ports, cp)
		case referenced[p.Name] && referenced[box.Spec.Ports[j].Name]:
			return nil, fmt.Errorf("spec.ports[%d].name: %q and %q (spec.ports[%d]) are both referred to by name but lead to the same container port %d/%s, which can carry only one name",
				i, p.Name, box.Spec.Ports[j].Name, j, key.ContainerPort, key.Protocol)
		case referenced[p.Name]:
			namedBy[key] = i
			for _, cp := range ports {
				if *cp.ContainerPort == key.ContainerPort && *cp.Protocol == key.Protocol {
					cp.WithName(p.Name)
				}
			}
		}
	}
	return ports, nil
}

// referencedPortNames are the port names that named targetPorts and probe
// ports refer to.
func referencedPortNames(box *modelv1.ModelBox) map[string]bool {
	names := map[string]bool{}
	for _, p := range box.Spec.Ports {
		if isNamed(p.TargetPort) {
			names[p.TargetPort.StrVal] = true
		}
	}
	if pr := box.Spec.Probes; pr != nil {
		for _, probe := range []*corev1.Probe{pr.Readiness, pr.Liveness, pr.Startup} {
			if probe == nil {
				continue
			}
			if h := probe.HTTPGet; h != nil && h.Port.Type == intstr.String {
				names[h.Port.StrVal] = true
			}
			if t := probe.TCPSocket; t != nil && t.Port.Type == intstr.String {
				names[t.Port.StrVal] = true
			}
		}
	}
	return names
}

// resourcesOf is the application container's resources: the preset of
// spec.size, or spec.resources, or small when neither is given.
func resourcesOf(box *modelv1.ModelBox) *corev1.ResourceRequirements {
	switch size := box.Spec.Size; {
	case size == modelv1.SizeCustom || (size == "" && box.Spec.Resources != nil):
		if box.Spec.Resources == nil {
			return &corev1.ResourceRequirements{}
		}
		return box.Spec.Resources
	case size == "":
		r := presets[modelv1.SizeSmall]
		return &r
	default:
		r := presets[size]
		return &r
	}
}

// probesFor returns the application container's readiness, liveness and
// startup probes: the given ones, and for readiness and liveness a TCP check
// of the first TCP port by default.
func probesFor(box *modelv1.ModelBox) (readiness, liveness, startup *corev1ac.ProbeApplyConfiguration, err error) {
	p := box.Spec.Probes
	if p == nil {
		p = &modelv1.Probes{}
	}
	if p.Disabled {
		return nil, nil, nil, nil
	}
	port, hasPort := firstTCPPort(box)
	if readiness, err = convert[corev1ac.ProbeApplyConfiguration](p.Readiness); err != nil {
		return nil, nil, nil, fmt.Errorf("spec.probes.readiness: %w", err)
	}
	if readiness == nil && hasPort {
		readiness = corev1ac.Probe().
			WithTCPSocket(corev1ac.TCPSocketAction().WithPort(intstr.FromInt32(port))).
			WithPeriodSeconds(10)
	}
	if liveness, err = convert[corev1ac.ProbeApplyConfiguration](p.Liveness); err != nil {
		return nil, nil, nil, fmt.Errorf("spec.probes.liveness: %w", err)
	}
	if liveness == nil && hasPort {
		liveness = corev1ac.Probe().
			WithTCPSocket(corev1ac.TCPSocketAction().WithPort(intstr.FromInt32(port))).
			WithInitialDelaySeconds(15).
			WithPeriodSeconds(20)
	}
	if startup, err = convert[corev1ac.ProbeApplyConfiguration](p.Startup); err != nil {
		return nil, nil, nil, fmt.Errorf("spec.probes.startup: %w", err)
	}
	return readiness, liveness, startup, nil
}

func firstTCPPort(box *modelv1.ModelBox) (int32, bool) {
	for _, p := range box.Spec.Ports {
		if protocolOf(p) == corev1.ProtocolTCP {
			return containerPortOf(box, p), true
		}
	}
	return 0, false
}

// serviceFor is the Service in front of box's pods; nil when box has no
// ports, since a Service needs at least one. The cluster IP is left to
// Kubernetes, so it stays what it was given at creation.
func serviceFor(box *modelv1.ModelBox) *corev1ac.ServiceApplyConfiguration {
	if len(box.Spec.Ports) == 0 {
		return nil
	}
	spec := corev1ac.ServiceSpec().WithType(serviceTypeOf(box)).WithSelector(selectorFor(box))
	for _, p := range box.Spec.Ports {
		sp := corev1ac.ServicePort().
			WithProtocol(protocolOf(p)).
			WithPort(p.Port).
			WithTargetPort(ptr.Deref(p.TargetPort, intstr.FromInt32(p.Port)))
		if p.Name != "" {
			sp.WithName(p.Name)
		}
		if p.AppProtocol != nil {
			sp.WithAppProtocol(*p.AppProtocol)
		}
		if p.NodePort != 0 {
			sp.WithNodePort(p.NodePort)
		}
		spec.WithPorts(sp)
	}
	return corev1ac.Service(box.Name, box.Namespace).
		WithLabels(labelsFor(box)).
		WithOwnerReferences(ownerFor(box)).
		WithSpec(spec)
}

// hpaFor is the HorizontalPodAutoscaler of box; nil without autoscaling.
func hpaFor(box *modelv1.ModelBox) *autoscalingv2ac.HorizontalPodAutoscalerApplyConfiguration {
	as := box.Spec.Autoscaling
	if as == nil {
		return nil
	}
	target := int32(80)
	if as.TargetCPUUtilizationPercentage != nil {
		target = *as.TargetCPUUtilizationPercentage
	}
	return autoscalingv2ac.HorizontalPodAutoscaler(box.Name, box.Namespace).
		WithLabels(labelsFor(box)).
		WithOwnerReferences(ownerFor(box)).
		WithSpec(autoscalingv2ac.HorizontalPodAutoscalerSpec().
			WithScaleTargetRef(autoscalingv2ac.CrossVersionObjectReference().
				WithAPIVersion("apps/v1").WithKind("Deployment").WithName(box.Name)).
			WithMinReplicas(minReplicasOf(box)).
			WithMaxReplicas(as.MaxReplicas).
			WithMetrics(autoscalingv2ac.MetricSpec().
				WithType(autoscalingv2.ResourceMetricSourceType).
				WithResource(autoscalingv2ac.ResourceMetricSource().
					WithName(corev1.ResourceCPU).
					WithTarget(autoscalingv2ac.MetricTarget().
						WithType(autoscalingv2.UtilizationMetricType).
						WithAverageUtilization(target)))))
}

// pdbFor is the PodDisruptionBudget of box: at most one pod evicted at a
// time. nil when box runs at most one pod, where a budget would block node
// drains for good. current is the Deployment's replica count, which counts
// when neither spec.replicas nor autoscaling does.
func pdbFor(box *modelv1.ModelBox, current *int32) *policyv1ac.PodDisruptionBudgetApplyConfiguration {
	floor := minReplicasOf(box)
	if box.Spec.Replicas == nil && box.Spec.Autoscaling == nil {
		floor = ptr.Deref(current, 1)
	}
	if floor <= 1 {
		return nil
	}
	return policyv1ac.PodDisruptionBudget(box.Name, box.Namespace).
		WithLabels(labelsFor(box)).
		WithOwnerReferences(ownerFor(box)).
		WithSpec(policyv1ac.PodDisruptionBudgetSpec().
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorFor(box))).
			WithMaxUnavailable(intstr.FromInt32(1)))
}

func ownerFor(box *modelv1.ModelBox) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(modelv1.GroupVersion.String()).
		WithKind("ModelBox").
		WithName(box.Name).
		WithUID(box.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// selectorFor selects box's pods. It never changes: a Deployment's selector
// is immutable.
func selectorFor(box *modelv1.ModelBox) map[string]string {
	return map[string]string{LabelModelBox: box.Name}
}

func labelsFor(box *modelv1.ModelBox) map[string]string {
	return map[string]string{LabelModelBox: box.Name, labelName: box.Name, labelManager: "deckhand"}
}

func containerName(box *modelv1.ModelBox) string {
	if box.Spec.Name != "" {
		return box.Spec.Name
	}
	return box.Name
}

// serviceTypeOf is spec.serviceType, or NodePort when a port asks for a node
// port (as in the seed), or ClusterIP.
func serviceTypeOf(box *modelv1.ModelBox) corev1.ServiceType {
	if box.Spec.ServiceType != "" {
		return box.Spec.ServiceType
	}
	for _, p := range box.Spec.Ports {
		if p.NodePort != 0 {
			return corev1.ServiceTypeNodePort
		}
	}
	return corev1.ServiceTypeClusterIP
}

// minReplicasOf is the fewest pods box asks for: spec.replicas, or
// autoscaling's minReplicas, or one.
func minReplicasOf(box *modelv1.ModelBox) int32 {
	if as := box.Spec.Autoscaling; as != nil {
		return ptr.Deref(as.MinReplicas, 1)
	}
	return ptr.Deref(box.Spec.Replicas, 1)
}

// containerPortOf is the number of the container port p leads to: its
// numeric targetPort, or port, or for a named targetPort the number of the
// port of that name (0 if there is none, which the schema refuses).
func containerPortOf(box *modelv1.ModelBox, p modelv1.ServicePort) int32 {
	switch {
	case p.TargetPort == nil:
		return p.Port
	case !isNamed(p.TargetPort):
		return p.TargetPort.IntVal
	}
	for _, q := range box.Spec.Ports {
		if q.Name == p.TargetPort.StrVal && !isNamed(q.TargetPort) && protocolOf(q) == protocolOf(p) {
			return containerPortOf(box, q)
		}
	}
	return 0
}

func isNamed(port *intstr.IntOrString) bool {
	return port != nil && port.Type == intstr.String
}

func protocolOf(p modelv1.ServicePort) corev1.Protocol {
	if p.Protocol != "" {
		return p.Protocol
	}
	return corev1.ProtocolTCP
}

// convert turns a typed API value into its apply configuration through JSON,
// which both share; nil stays nil.
func convert[T any, F any](from *F) (*T, error) {
	if from == nil {
		return nil, nil
	}
	data, err := json.Marshal(from)
	if err != nil {
		return nil, err
	}
	to := new(T)
	if err := json.Unmarshal(data, to); err != nil {
		return nil, err
	}
	return to, nil
}
