package manager

import (
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/scopedcache/compact"
	"github.com/deckhand-dev/deckhand/internal/scopedcache/intern"
)

// podCache is how the manager's cache holds pods. A cluster holds many more
// pods than Deckhand ever acts on, a full pod is several kilobytes in memory,
// and a PodSet's pods carry the template a namespace editor sized (up to the
// object size limit), so every pod is cached slimmed by SlimPod, as a
// cachedPod (ExpandPod turns it back into a corev1.Pod for every read,
// handler and index: the Need of pods says so, see needs).
func podCache() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&corev1.Pod{}: {Transform: SlimPod},
	}
}

// SlimPod is the cache transform for pods. A pod keeps its metadata, which
// every reader decides on (name, namespace, UID, resourceVersion,
// generation, creation and deletion timestamps, labels for selectors, owner
// references for adoption and release, finalizers; annotations and
// managedFields are dropped), and the fields each controller of the registry
// reads from the cache (SlimPod of its entry: PodBugger's names of
// containers, node, phase, the states the incident recorder judges and the
// ephemeral container statuses; PodSet's node, phase, reason, message, Ready
// condition, containers' states and restart counts and deletion-order
// annotations of the pods it controls). No pod is kept whole: a reader that
// needs more reads it from the apiserver (PodBugger plans every injection on
// an uncached list). A controller that reads another field from the cache
// adds it to its entry's SlimPod.
//
// The slim pod is held as a cachedPod, which holds exactly what it carries
// in less memory (issue 26: a slim corev1.Pod cost 3.3 KB of live heap).
func SlimPod(obj any) (any, error) {
	if pod, ok := slimPod(controllers, obj).(*corev1.Pod); ok {
		return compactPod(pod), nil
	}
	return obj, nil // a cachedPod already, a tombstone (cache.DeletedFinalStateUnknown) or metadata
}

// slimPod is what the registry's SlimPods keep of obj, a pod; anything
// else as it is.
func slimPod(registry []Controller, obj any) any {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj
	}
	slim := &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:                       pod.Name,
			Namespace:                  pod.Namespace,
			UID:                        pod.UID,
			ResourceVersion:            pod.ResourceVersion,
			Generation:                 pod.Generation,
			CreationTimestamp:          pod.CreationTimestamp,
			DeletionTimestamp:          pod.DeletionTimestamp,
			DeletionGracePeriodSeconds: pod.DeletionGracePeriodSeconds,
			Labels:                     pod.Labels,
			OwnerReferences:            pod.OwnerReferences,
			Finalizers:                 pod.Finalizers,
		},
	}
	for _, c := range registry {
		if c.SlimPod != nil {
			c.SlimPod(pod, slim)
		}
	}
	return slim
}

// cachedPod is what the manager's cache holds of a pod: a slim pod
// (slimPod) in a type that holds only the fields a slim pod has, as a
// cachedJob does for Jobs. A corev1.Pod is some 1,240 bytes before any of
// its content (its spec alone has over 40 fields) and a ContainerStatus 216;
// a cachedPod holds names, states and conditions in structs of their own,
// with the strings many pods repeat (namespace, label keys and values,
// node, container names, phase, reasons) interned. ExpandPod turns it back
// into the slim corev1.Pod, equal field for field; a slim pod with a field
// the compact form does not hold (a SlimPod that starts keeping one before
// cachedPod learns it) is held as it is (whole), so no reader ever misses a
// field: only memory says so (TestCachedPodHeap).
type cachedPod struct {
	// Meta holds the slim pod's metadata.
	compact.Meta
	node string
	// names are the names of the containers, then of the init containers
	// (inits of them), then of the ephemeral containers (ephemerals).
	names []string
	// statuses are the containers' statuses, then the init containers'
	// (initStatuses of them), then the ephemeral containers'
	// (ephemeralStatuses).
	statuses                                           []cachedStatus
	inits, ephemerals, initStatuses, ephemeralStatuses uint16
	phase                                              corev1.PodPhase
	conditions                                         []cachedCondition
	// why is the pod's reason and message, nil without either.
	why *[2]string
	// whole is the slim pod when the fields above cannot hold it.
	whole *corev1.Pod
}

// cachedCondition is a pod condition's type, status, reason and time, all
// of it a SlimPod keeps.
type cachedCondition struct {
	typ    corev1.PodConditionType
	status corev1.ConditionStatus
	reason string
	at     metav1.Time
}

// cachedStatus is a container's status: name, states, readiness and
// restarts, and in rest whatever else of it a SlimPod kept (PodBugger keeps
// its ephemeral containers' statuses as a kubelet reports them: image,
// container ID, started), nil when nothing.
type cachedStatus struct {
	name        string
	state, last corev1.ContainerState
	restarts    int32
	ready       bool
	rest        *corev1.ContainerStatus
}

var _ client.Object = &cachedPod{}

// GetObjectKind has no kind: a cachedPod never leaves the cache.
func (c *cachedPod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject copies the cachedPod.
func (c *cachedPod) DeepCopyObject() runtime.Object {
	if c.whole != nil {
		whole := c.whole.DeepCopy()
		return &cachedPod{whole: whole, Meta: compact.MetaOf(&whole.ObjectMeta)}
	}
	out := *c
	out.Meta = c.DeepCopy()
	out.names = slices.Clone(c.names)
	if c.why != nil {
		why := *c.why
		out.why = &why
	}
	out.conditions = slices.Clone(c.conditions)
	out.statuses = slices.Clone(c.statuses)
	for i := range out.statuses {
		s := &out.statuses[i]
		s.state, s.last, s.rest = *s.state.DeepCopy(), *s.last.DeepCopy(), s.rest.DeepCopy()
	}
	return &out
}

// compactPod is slim held as a cachedPod.
func compactPod(slim *corev1.Pod) *cachedPod {
	c := compactFields(slim)
	// Semantically: an empty list or map reads as none (the apiserver
	// sends neither).
	if !equality.Semantic.DeepEqual(c.pod(slim.TypeMeta), slim) {
		return &cachedPod{Meta: compact.MetaOf(&slim.ObjectMeta), whole: slim}
	}
	return c
}

// compactFields holds what it can of slim; compactPod checks that it was
// all.
func compactFields(slim *corev1.Pod) *cachedPod {
	c := &cachedPod{Meta: compact.MetaOf(&slim.ObjectMeta)}
	spec, st := &slim.Spec, &slim.Status
	c.node = intern.String(spec.NodeName)
	c.inits, c.ephemerals = uint16(len(spec.InitContainers)), uint16(len(spec.EphemeralContainers)) //nolint:gosec // overflowing, the pod would be held whole
	if n := len(spec.Containers) + len(spec.InitContainers) + len(spec.EphemeralContainers); n > 0 {
		c.names = make([]string, 0, n)
		for _, ct := range slices.Concat(spec.Containers, spec.InitContainers) {
			c.names = append(c.names, intern.String(ct.Name))
		}
		for _, ct := range spec.EphemeralContainers {
			c.names = append(c.names, intern.String(ct.Name))
		}
	}
	c.phase = corev1.PodPhase(intern.String(string(st.Phase)))
	if st.Reason != "" || st.Message != "" {
		c.why = &[2]string{intern.String(st.Reason), st.Message}
	}
	if len(st.Conditions) > 0 {
		c.conditions = make([]cachedCondition, len(st.Conditions))
		for i, k := range st.Conditions {
			c.conditions[i] = cachedCondition{typ: corev1.PodConditionType(intern.String(string(k.Type))),
				status: corev1.ConditionStatus(intern.String(string(k.Status))), reason: intern.String(k.Reason), at: k.LastTransitionTime}
		}
	}
	c.initStatuses, c.ephemeralStatuses = uint16(len(st.InitContainerStatuses)), uint16(len(st.EphemeralContainerStatuses)) //nolint:gosec // overflowing, the pod would be held whole
	if n := len(st.ContainerStatuses) + len(st.InitContainerStatuses) + len(st.EphemeralContainerStatuses); n > 0 {
		c.statuses = make([]cachedStatus, 0, n)
		for _, s := range slices.Concat(st.ContainerStatuses, st.InitContainerStatuses, st.EphemeralContainerStatuses) {
			cs := cachedStatus{name: intern.String(s.Name), state: compactState(s.State), last: compactState(s.LastTerminationState),
				restarts: s.RestartCount, ready: s.Ready}
			s.Name, s.State, s.LastTerminationState, s.RestartCount, s.Ready = "", corev1.ContainerState{}, corev1.ContainerState{}, 0, false
			if !reflect.ValueOf(s).IsZero() {
				s.Image, s.ImageID = intern.String(s.Image), intern.String(s.ImageID)
				cs.rest = &s
			}
			c.statuses = append(c.statuses, cs)
		}
	}
	return c
}

// compactState is s with its reasons interned.
func compactState(s corev1.ContainerState) corev1.ContainerState {
	out := s
	if s.Waiting != nil {
		out.Waiting = &corev1.ContainerStateWaiting{Reason: intern.String(s.Waiting.Reason), Message: s.Waiting.Message}
	}
	if t := s.Terminated; t != nil {
		held := *t
		held.Reason = intern.String(t.Reason)
		out.Terminated = &held
	}
	return out
}

// pod is the slim pod c holds, new, with type meta tm.
func (c *cachedPod) pod(tm metav1.TypeMeta) *corev1.Pod {
	if c.whole != nil {
		p := c.whole.DeepCopy()
		p.TypeMeta = tm
		return p
	}
	p := &corev1.Pod{TypeMeta: tm, ObjectMeta: c.ObjectMeta()}
	spec, st := &p.Spec, &p.Status
	spec.NodeName = c.node
	inits, ephemerals := int(c.inits), int(c.ephemerals)
	containers := len(c.names) - inits - ephemerals
	if containers < 0 {
		containers, inits, ephemerals = len(c.names), 0, 0 // counts overflowed: compactPod holds the pod whole
	}
	spec.Containers = containersNamed(c.names[:containers])
	spec.InitContainers = containersNamed(c.names[containers : containers+inits])
	if ephemerals > 0 {
		spec.EphemeralContainers = make([]corev1.EphemeralContainer, ephemerals)
		for i, name := range c.names[containers+inits:] {
			spec.EphemeralContainers[i].Name = name
		}
	}
	st.Phase = c.phase
	if c.why != nil {
		st.Reason, st.Message = c.why[0], c.why[1]
	}
	if len(c.conditions) > 0 {
		st.Conditions = make([]corev1.PodCondition, len(c.conditions))
		for i, k := range c.conditions {
			st.Conditions[i] = corev1.PodCondition{Type: k.typ, Status: k.status, Reason: k.reason, LastTransitionTime: k.at}
		}
	}
	initStatuses, ephemeralStatuses := int(c.initStatuses), int(c.ephemeralStatuses)
	statuses := len(c.statuses) - initStatuses - ephemeralStatuses
	if statuses < 0 {
		statuses, initStatuses = len(c.statuses), 0 // as above
	}
	st.ContainerStatuses = containerStatuses(c.statuses[:statuses])
	st.InitContainerStatuses = containerStatuses(c.statuses[statuses : statuses+initStatuses])
	st.EphemeralContainerStatuses = containerStatuses(c.statuses[statuses+initStatuses:])
	return p
}

func containersNamed(names []string) []corev1.Container {
	if len(names) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(names))
	for i, name := range names {
		out[i].Name = name
	}
	return out
}

func containerStatuses(held []cachedStatus) []corev1.ContainerStatus {
	if len(held) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(held))
	for i, s := range held {
		if s.rest != nil {
			s.rest.DeepCopyInto(&out[i])
		}
		out[i].Name, out[i].State, out[i].LastTerminationState = s.name, *s.state.DeepCopy(), *s.last.DeepCopy()
		out[i].Ready, out[i].RestartCount = s.ready, s.restarts
	}
	return out
}

// ExpandPod is the scoped cache's Need.Expand for pods: the corev1.Pod a
// cachedPod stands for, new.
func ExpandPod(held client.Object) (client.Object, bool) {
	c, ok := held.(*cachedPod)
	if !ok {
		return held, false
	}
	return c.pod(metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}), true
}
