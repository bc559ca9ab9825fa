package policy

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
)

func TestArtifactsErrorsNameTheField(t *testing.T) {
	pb := func(change func(*debugv1beta1.PodBugger)) *debugv1beta1.PodBugger {
		p := &debugv1beta1.PodBugger{Spec: debugv1beta1.PodBuggerSpec{Image: "busybox:1.37",
			Triggers:  []debugv1beta1.Trigger{debugv1beta1.TriggerError},
			Incidents: &debugv1beta1.IncidentPolicy{Inject: true, Artifacts: &debugv1beta1.IncidentArtifacts{Volume: "dumps"}}}}
		change(p)
		return p
	}
	tests := map[string]struct {
		pb   *debugv1beta1.PodBugger
		want string
	}{
		"fine": {pb(func(*debugv1beta1.PodBugger) {}), ""},
		"fine with Running": {pb(func(p *debugv1beta1.PodBugger) {
			p.Spec.Triggers = append(p.Spec.Triggers, debugv1beta1.TriggerRunning)
			p.Spec.Incidents.Inject = false
		}), ""},
		"a path":           {pb(func(p *debugv1beta1.PodBugger) { p.Spec.Incidents.Artifacts.Volume = "../x" }), "spec.incidents.artifacts.volume"},
		"no volume":        {pb(func(p *debugv1beta1.PodBugger) { p.Spec.Incidents.Artifacts.Volume = "" }), "spec.incidents.artifacts.volume"},
		"a bad container":  {pb(func(p *debugv1beta1.PodBugger) { p.Spec.Incidents.Artifacts.Containers = []string{"A"} }), "spec.incidents.artifacts.containers[0]"},
		"twice":            {pb(func(p *debugv1beta1.PodBugger) { p.Spec.Incidents.Artifacts.Containers = []string{"a", "a"} }), "spec.incidents.artifacts.containers[1]"},
		"a file too large": {pb(func(p *debugv1beta1.PodBugger) { p.Spec.Incidents.Artifacts.MaxFileBytes = ptr.To[int64](2 << 30) }), "spec.incidents.artifacts.maxFileBytes"},
		"none":             {pb(func(p *debugv1beta1.PodBugger) { p.Spec.Incidents.Artifacts.MaxBytes = ptr.To[int64](0) }), "spec.incidents.artifacts.maxBytes"},
		"file over all": {pb(func(p *debugv1beta1.PodBugger) {
			p.Spec.Incidents.Artifacts.MaxBytes, p.Spec.Incidents.Artifacts.MaxFileBytes = ptr.To[int64](10), ptr.To[int64](11)
		}), "spec.incidents.artifacts.maxFileBytes"},
		"keep too many":   {pb(func(p *debugv1beta1.PodBugger) { p.Spec.Incidents.Artifacts.Keep = ptr.To[int32](11) }), "spec.incidents.artifacts.keep"},
		"keep below none": {pb(func(p *debugv1beta1.PodBugger) { p.Spec.Incidents.Artifacts.Keep = ptr.To[int32](-1) }), "spec.incidents.artifacts.keep"},
		"every bound at its most": {pb(func(p *debugv1beta1.PodBugger) {
			a := p.Spec.Incidents.Artifacts
			a.Containers = []string{"c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8"}
			a.MaxFileBytes, a.MaxBytes, a.Keep = ptr.To(debugv1beta1.MaxArtifactMaxFileBytes), ptr.To(debugv1beta1.MaxArtifactMaxBytes), ptr.To(debugv1beta1.MaxArtifactKeep)
		}), ""},
		"every bound at its least": {pb(func(p *debugv1beta1.PodBugger) {
			a := p.Spec.Incidents.Artifacts
			a.MaxFileBytes, a.MaxBytes, a.Keep = ptr.To[int64](1), ptr.To[int64](1), ptr.To[int32](0)
		}), ""},
		"too many containers": {pb(func(p *debugv1beta1.PodBugger) {
			p.Spec.Incidents.Artifacts.Containers = []string{"c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9"}
		}), "spec.incidents.artifacts.containers: Too many"},
		"never injected": {pb(func(p *debugv1beta1.PodBugger) { p.Spec.Incidents.Inject = false }), "spec.incidents.artifacts:"},
		"with a command": {pb(func(p *debugv1beta1.PodBugger) { p.Spec.Args = []string{"x"} }), "spec.command"},
	}
	for name, tt := range tests {
		errs := ArtifactsErrors(tt.pb)
		switch {
		case tt.want == "" && len(errs) > 0:
			t.Errorf("%s: %v", name, errs)
		case tt.want != "" && (len(errs) == 0 || !strings.HasPrefix(errs.ToAggregate().Error(), tt.want)):
			t.Errorf("%s: %v, want an error on %s", name, errs, tt.want)
		}
	}
}

func TestArtifactsOfAppliesTheBounds(t *testing.T) {
	pb := &debugv1beta1.PodBugger{Spec: debugv1beta1.PodBuggerSpec{Incidents: &debugv1beta1.IncidentPolicy{
		Artifacts: &debugv1beta1.IncidentArtifacts{Volume: "d", MaxFileBytes: ptr.To[int64](1 << 40), MaxBytes: ptr.To[int64](-5), Keep: ptr.To[int32](99)}}}}
	a := ArtifactsOf(pb)
	if a.MaxBytes != 1 || a.MaxFileBytes != 1 || a.Keep != debugv1beta1.MaxArtifactKeep {
		t.Errorf("bounds not applied: %+v", a)
	}
	if ArtifactsOf(&debugv1beta1.PodBugger{}) != nil || (*Artifacts)(nil).Collects("app") {
		t.Error("a PodBugger without artifacts collects")
	}
}

// A file cap under the total is kept as written; the containers named are
// the ones whose failures are collected, every one when none is named.
func TestArtifactsOfKeepsWhatIsWritten(t *testing.T) {
	of := func(in debugv1beta1.IncidentArtifacts) *Artifacts {
		return ArtifactsOf(&debugv1beta1.PodBugger{Spec: debugv1beta1.PodBuggerSpec{Incidents: &debugv1beta1.IncidentPolicy{Artifacts: &in}}})
	}
	if a := of(debugv1beta1.IncidentArtifacts{Volume: "d", MaxFileBytes: ptr.To[int64](1000)}); a.MaxFileBytes != 1000 || a.MaxBytes != debugv1beta1.DefaultArtifactMaxBytes {
		t.Errorf("maxFileBytes 1000 gave %+v", a)
	}
	every := of(debugv1beta1.IncidentArtifacts{Volume: "d"})
	if !every.Collects("app") || every.Collects("") {
		t.Error("artifacts naming no container do not collect every container, or collect one with no name")
	}
	named := of(debugv1beta1.IncidentArtifacts{Volume: "d", Containers: []string{"app"}})
	if !named.Collects("app") || named.Collects("sidecar") {
		t.Error("artifacts naming app do not collect app alone")
	}
}
