package policy

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
)

// TestOnlyAnInjectingPodBuggerAnswersToTheRules: a PodBugger that only
// records incidents runs nothing in any pod, so no rule applies to it (the
// namespace's opt-in included); one that injects, on Running or on an
// incident, answers to every rule.
func TestOnlyAnInjectingPodBuggerAnswersToTheRules(t *testing.T) {
	images, err := ParseImagePatterns([]string{"busybox:*"})
	if err != nil {
		t.Fatal(err)
	}
	p := Policy{AllowedImages: images}
	tests := map[string]struct {
		triggers []debugv1beta1.Trigger
		inject   bool
		want     []string // violation reasons, in order
	}{
		"no triggers: Running":  {want: []string{debugv1beta1.ReasonNamespaceNotEnabled, debugv1beta1.ReasonImageNotAllowed}},
		"Running and Error":     {triggers: []debugv1beta1.Trigger{"Running", "Error"}, want: []string{debugv1beta1.ReasonNamespaceNotEnabled, debugv1beta1.ReasonImageNotAllowed}},
		"capture only":          {triggers: []debugv1beta1.Trigger{"Error", "OOMKilled"}},
		"injecting on incident": {triggers: []debugv1beta1.Trigger{"CrashLoopBackOff"}, inject: true, want: []string{debugv1beta1.ReasonNamespaceNotEnabled, debugv1beta1.ReasonImageNotAllowed}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			pb := &debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "dbg"},
				Spec: debugv1beta1.PodBuggerSpec{Image: "evil:1", Triggers: tt.triggers}}
			if tt.inject {
				pb.Spec.Incidents = &debugv1beta1.IncidentPolicy{Inject: true}
			}
			var got []string
			for _, v := range p.Violations(pb, nil) {
				got = append(got, v.Reason)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("violations %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("violations %v, want %v", got, tt.want)
				}
			}
		})
	}
}
