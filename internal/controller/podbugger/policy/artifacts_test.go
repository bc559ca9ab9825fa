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
		"keep too many":  {pb(func(p *debugv1beta1.PodBugger) { p.Spec.Incidents.Artifacts.Keep = ptr.To[int32](11) }), "spec.incidents.artifacts.keep"},
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
