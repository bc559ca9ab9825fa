package v1alpha1

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
)

// ConversionDataAnnotation holds, on a PodBugger read as v1alpha1, the
// v1beta1 fields v1alpha1 has no place for (spec.runAsUser, spec.triggers,
// spec.notReadyAfter, spec.incidents), as JSON. A
// v1alpha1 client that reads, changes and writes back the object keeps the
// annotation, and the fields come back when the object is converted to
// v1beta1 again; the annotation is never stored.
const ConversionDataAnnotation = "debug.deckhand.dev/conversion-data"

// conversionData is what ConversionDataAnnotation holds.
type conversionData struct {
	RunAsUser     *int64                       `json:"runAsUser,omitempty"`
	Triggers      []debugv1beta1.Trigger       `json:"triggers,omitempty"`
	NotReadyAfter *metav1.Duration             `json:"notReadyAfter,omitempty"`
	Incidents     *debugv1beta1.IncidentPolicy `json:"incidents,omitempty"`
}

// empty reports whether d holds nothing worth an annotation.
func (d conversionData) empty() bool {
	return d.RunAsUser == nil && len(d.Triggers) == 0 && d.NotReadyAfter == nil && d.Incidents == nil
}

// ConvertTo converts this PodBugger to the hub version, v1beta1.
func (src *PodBugger) ConvertTo(dstRaw conversion.Hub) error {
	dst, ok := dstRaw.(*debugv1beta1.PodBugger)
	if !ok {
		return fmt.Errorf("converting a v1alpha1 PodBugger to %T: not the hub", dstRaw)
	}
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	in := src.Spec.DeepCopy()
	dst.Spec = debugv1beta1.PodBuggerSpec{
		Selector:            in.Selector,
		Image:               in.Image,
		Command:             in.Command,
		Args:                in.Args,
		TargetContainerName: in.TargetContainerName,
		Profile:             debugv1beta1.Profile(in.Profile),
		MaxPods:             in.MaxPods,
		Suspend:             in.Suspend,
	}
	if raw, ok := dst.Annotations[ConversionDataAnnotation]; ok {
		// Data that does not parse (edited by hand) is dropped: what the
		// v1alpha1 object itself says still converts whole.
		var data conversionData
		if json.Unmarshal([]byte(raw), &data) == nil {
			dst.Spec.RunAsUser = data.RunAsUser
			dst.Spec.Triggers = data.Triggers
			dst.Spec.NotReadyAfter = data.NotReadyAfter
			dst.Spec.Incidents = data.Incidents
		}
		delete(dst.Annotations, ConversionDataAnnotation)
		if len(dst.Annotations) == 0 {
			dst.Annotations = nil
		}
	}
	dst.Status = debugv1beta1.PodBuggerStatus{
		ObservedGeneration: src.Status.ObservedGeneration,
		Installed:          src.Status.Installed,
		Conditions:         src.Status.DeepCopy().Conditions,
	}
	if src.Status.Pods != nil {
		dst.Status.Pods = make([]debugv1beta1.DebuggedPod, len(src.Status.Pods))
		for i, p := range src.Status.Pods {
			dst.Status.Pods[i] = debugv1beta1.DebuggedPod{
				Name: p.Name, UID: p.UID, Time: p.Time,
				State: debugv1beta1.DebuggerState(p.State), Reason: p.Reason, Message: p.Message,
			}
		}
	}
	return nil
}

// ConvertFrom converts a hub (v1beta1) PodBugger to this version.
func (dst *PodBugger) ConvertFrom(srcRaw conversion.Hub) error {
	src, ok := srcRaw.(*debugv1beta1.PodBugger)
	if !ok {
		return fmt.Errorf("converting %T to a v1alpha1 PodBugger: not the hub", srcRaw)
	}
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	in := src.Spec.DeepCopy()
	dst.Spec = PodBuggerSpec{
		Selector:            in.Selector,
		Image:               in.Image,
		Command:             in.Command,
		Args:                in.Args,
		TargetContainerName: in.TargetContainerName,
		Profile:             Profile(in.Profile),
		MaxPods:             in.MaxPods,
		Suspend:             in.Suspend,
	}
	delete(dst.Annotations, ConversionDataAnnotation)
	if data := (conversionData{RunAsUser: in.RunAsUser, Triggers: in.Triggers, NotReadyAfter: in.NotReadyAfter,
		Incidents: in.Incidents}); !data.empty() {
		raw, err := json.Marshal(data)
		if err != nil {
			return fmt.Errorf("recording the v1beta1 fields of PodBugger %s: %w", src.Name, err)
		}
		if dst.Annotations == nil {
			dst.Annotations = map[string]string{}
		}
		dst.Annotations[ConversionDataAnnotation] = string(raw)
	}
	dst.Status = PodBuggerStatus{
		ObservedGeneration: src.Status.ObservedGeneration,
		Installed:          src.Status.Installed,
		Conditions:         src.Status.DeepCopy().Conditions,
	}
	if src.Status.Pods != nil {
		dst.Status.Pods = make([]DebuggedPod, len(src.Status.Pods))
		for i, p := range src.Status.Pods {
			dst.Status.Pods[i] = DebuggedPod{
				Name: p.Name, UID: p.UID, Time: p.Time,
				State: DebuggerState(p.State), Reason: p.Reason, Message: p.Message,
			}
		}
	}
	return nil
}
