package v1beta1

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/policy"
)

func TestValidatePodBugger(t *testing.T) {
	images, err := policy.ParseImagePatterns([]string{"busybox:*"})
	if err != nil {
		t.Fatal(err)
	}
	enabled := map[string]string{debugv1beta1.NamespaceEnabledLabel: "true"}
	valid := func() *debugv1beta1.PodBugger {
		return &debugv1beta1.PodBugger{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "dbg"},
			Spec: debugv1beta1.PodBuggerSpec{
				Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Image:    "busybox:1.37",
				Profile:  debugv1beta1.ProfileRestricted,
			},
		}
	}
	tests := map[string]struct {
		mutate    func(*debugv1beta1.PodBugger)
		nsLabels  map[string]string
		policy    policy.Policy
		badFields []string
	}{
		"valid":                       {nsLabels: enabled},
		"namespace without the label": {badFields: []string{"metadata.namespace"}},
		"namespace label is not true": {nsLabels: map[string]string{debugv1beta1.NamespaceEnabledLabel: "yes"}, badFields: []string{"metadata.namespace"}},
		"image off the allow-list":    {nsLabels: enabled, mutate: func(pb *debugv1beta1.PodBugger) { pb.Spec.Image = "evil:1" }, badFields: []string{"spec.image"}},
		"general without the flag":    {nsLabels: enabled, mutate: func(pb *debugv1beta1.PodBugger) { pb.Spec.Profile = debugv1beta1.ProfileGeneral }, badFields: []string{"spec.profile"}},
		"general with the flag":       {nsLabels: enabled, policy: policy.Policy{AllowGeneralProfile: true}, mutate: func(pb *debugv1beta1.PodBugger) { pb.Spec.Profile = debugv1beta1.ProfileGeneral }},
		"baseline needs no flag":      {nsLabels: enabled, mutate: func(pb *debugv1beta1.PodBugger) { pb.Spec.Profile = debugv1beta1.ProfileBaseline }},
		"a bad selector":              {nsLabels: enabled, mutate: func(pb *debugv1beta1.PodBugger) { pb.Spec.Selector.MatchLabels = map[string]string{"bad key!": "x"} }, badFields: []string{"spec.selector.matchLabels"}},
		"every problem is reported at once": {mutate: func(pb *debugv1beta1.PodBugger) {
			pb.Spec.Image = "evil:1"
			pb.Spec.Profile = debugv1beta1.ProfileGeneral
		}, badFields: []string{"metadata.namespace", "spec.image", "spec.profile"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			pb := valid()
			if tt.mutate != nil {
				tt.mutate(pb)
			}
			p := tt.policy
			p.AllowedImages = images
			errs := ValidatePodBugger(pb, tt.nsLabels, p)
			fields := make([]string, 0, len(errs))
			for _, e := range errs {
				fields = append(fields, e.Field)
			}
			if strings.Join(fields, ",") != strings.Join(tt.badFields, ",") {
				t.Errorf("errors on %v, want %v: %v", fields, tt.badFields, errs)
			}
		})
	}
}

func FuzzValidatePodBugger(f *testing.F) {
	f.Add("busybox:1.37", "restricted", "app", "web", "true")
	f.Add("evil", "general", "bad key", "", "")
	images, err := policy.ParseImagePatterns([]string{"busybox:*", `re:quay\.io/.+`})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, image, profile, key, value, label string) {
		pb := &debugv1beta1.PodBugger{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "dbg"},
			Spec: debugv1beta1.PodBuggerSpec{
				Selector: metav1.LabelSelector{MatchLabels: map[string]string{key: value}},
				Image:    image, Profile: debugv1beta1.Profile(profile),
			},
		}
		errs := ValidatePodBugger(pb, map[string]string{debugv1beta1.NamespaceEnabledLabel: label}, policy.Policy{AllowedImages: images})
		// Whatever the input, an accepted PodBugger satisfies the policy.
		if len(errs) == 0 && (!images.Allows(image) || label != "true" || profile == string(debugv1beta1.ProfileGeneral)) {
			t.Fatalf("accepted %+v", pb.Spec)
		}
	})
}
