package policy

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
)

// Artifacts is what pb's spec.incidents.artifacts says, its bounds applied
// (a PodBugger written as v1alpha1 carries it in its conversion-data
// annotation, past the schema): nil when pb collects none.
type Artifacts struct {
	Volume       string
	Containers   []string
	MaxFileBytes int64
	MaxBytes     int64
	Keep         int32
}

// ArtifactsOf is pb's artifacts with their defaults and bounds, nil when pb
// names none.
func ArtifactsOf(pb *debugv1beta1.PodBugger) *Artifacts {
	if pb.Spec.Incidents == nil || pb.Spec.Incidents.Artifacts == nil {
		return nil
	}
	in := pb.Spec.Incidents.Artifacts
	a := &Artifacts{Volume: in.Volume, Containers: in.Containers, MaxFileBytes: debugv1beta1.DefaultArtifactMaxFileBytes,
		MaxBytes: debugv1beta1.DefaultArtifactMaxBytes, Keep: debugv1beta1.DefaultArtifactKeep}
	if in.MaxFileBytes != nil {
		a.MaxFileBytes = max(1, min(*in.MaxFileBytes, debugv1beta1.MaxArtifactMaxFileBytes))
	}
	if in.MaxBytes != nil {
		a.MaxBytes = max(1, min(*in.MaxBytes, debugv1beta1.MaxArtifactMaxBytes))
	}
	if in.Keep != nil {
		a.Keep = max(0, min(*in.Keep, debugv1beta1.MaxArtifactKeep))
	}
	a.MaxFileBytes = min(a.MaxFileBytes, a.MaxBytes)
	return a
}

// Collects reports whether a failure of container is one whose artifacts
// are listed.
func (a *Artifacts) Collects(container string) bool {
	if a == nil || container == "" {
		return false
	}
	if len(a.Containers) == 0 {
		return true
	}
	for _, c := range a.Containers {
		if c == container {
			return true
		}
	}
	return false
}

// ArtifactsErrors is what is wrong with pb's spec.incidents.artifacts, each
// naming its field: what the schema says, checked again for a PodBugger
// written as v1alpha1 (whose incidents travel in an annotation), and what
// it needs of the rest of the spec.
func ArtifactsErrors(pb *debugv1beta1.PodBugger) field.ErrorList {
	if pb.Spec.Incidents == nil || pb.Spec.Incidents.Artifacts == nil {
		return nil
	}
	in := pb.Spec.Incidents.Artifacts
	path := field.NewPath("spec", "incidents", "artifacts")
	var errs field.ErrorList
	if msgs := validation.IsDNS1123Label(in.Volume); len(msgs) > 0 {
		errs = append(errs, field.Invalid(path.Child("volume"), in.Volume,
			"must name a volume of the pod (spec.volumes[].name, a DNS-1123 label): "+msgs[0]))
	}
	if len(in.Containers) > debugv1beta1.MaxArtifactContainers {
		errs = append(errs, field.TooMany(path.Child("containers"), len(in.Containers), debugv1beta1.MaxArtifactContainers))
	}
	errs = append(errs, artifactContainerErrors(in.Containers, path.Child("containers"))...)
	errs = append(errs, artifactBoundErrors(in, path)...)
	if !Records(pb) || !InjectsRunning(pb) && !pb.Spec.Incidents.Inject {
		errs = append(errs, field.Invalid(path, in.Volume,
			"needs a failure trigger and the Running trigger or incidents.inject: the debug container collects them"))
	}
	if len(pb.Spec.Command) > 0 || len(pb.Spec.Args) > 0 {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "command"),
			"command and args must be empty with spec.incidents.artifacts: the debug container runs the collector"))
	}
	return errs
}

// artifactContainerErrors is what is wrong with the names in containers.
func artifactContainerErrors(containers []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, c := range containers {
		if msgs := validation.IsDNS1123Label(c); len(msgs) > 0 {
			errs = append(errs, field.Invalid(path.Index(i), c, "must name a container: "+msgs[0]))
		}
		if seen.Has(c) {
			errs = append(errs, field.Duplicate(path.Index(i), c))
		}
		seen.Insert(c)
	}
	return errs
}

// artifactBoundErrors is what is wrong with in's byte caps and keep.
func artifactBoundErrors(in *debugv1beta1.IncidentArtifacts, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	bytesIn := func(name string, v *int64, limit int64) {
		if v != nil && (*v < 1 || *v > limit) {
			errs = append(errs, field.Invalid(path.Child(name), *v, fmt.Sprintf("must be between 1 and %d", limit)))
		}
	}
	bytesIn("maxFileBytes", in.MaxFileBytes, debugv1beta1.MaxArtifactMaxFileBytes)
	bytesIn("maxBytes", in.MaxBytes, debugv1beta1.MaxArtifactMaxBytes)
	if in.MaxFileBytes != nil && in.MaxBytes != nil && *in.MaxFileBytes > *in.MaxBytes {
		errs = append(errs, field.Invalid(path.Child("maxFileBytes"), *in.MaxFileBytes, "must not exceed maxBytes"))
	}
	if in.Keep != nil && (*in.Keep < 0 || *in.Keep > debugv1beta1.MaxArtifactKeep) {
		errs = append(errs, field.Invalid(path.Child("keep"), *in.Keep, fmt.Sprintf("must be between 0 and %d", debugv1beta1.MaxArtifactKeep)))
	}
	return errs
}
