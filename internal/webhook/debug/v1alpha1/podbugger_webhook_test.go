package v1alpha1

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	debugv1alpha1 "github.com/deckhand-dev/deckhand/api/debug/v1alpha1"
)

func TestImagePatterns(t *testing.T) {
	tests := map[string]struct {
		patterns []string
		allowed  []string
		refused  []string
	}{
		"empty allows nothing": {
			refused: []string{"busybox", "docker.io/library/busybox:1.37", ""},
		},
		"a glob's star does not cross a slash": {
			patterns: []string{"registry.example.com/debug/*"},
			allowed:  []string{"registry.example.com/debug/tools:1.2", "registry.example.com/debug/tools@sha256:abc"},
			refused: []string{"registry.example.com/debug/x/y:1", "registry.example.com.evil.io/debug/tools",
				"evil.io/registry.example.com/debug/tools", "registry.example.com/debugger/tools"},
		},
		"a tag glob": {
			patterns: []string{"docker.io/library/busybox:*"},
			allowed:  []string{"docker.io/library/busybox:1.37", "docker.io/library/busybox:latest"},
			refused:  []string{"busybox:1.37", "docker.io/library/busybox", "docker.io/library/busybox:1.37/../../evil"},
		},
		"an exact image": {
			patterns: []string{"busybox:1.37"},
			allowed:  []string{"busybox:1.37"},
			refused:  []string{"busybox:1.36", "busybox:1.37x"},
		},
		"a regexp must match the whole image": {
			patterns: []string{`re:(docker\.io/library/)?busybox:1\.3[0-9]`},
			allowed:  []string{"busybox:1.37", "docker.io/library/busybox:1.30"},
			refused:  []string{"busybox:1.37-evil", "evil/busybox:1.37", "busybox:1.4"},
		},
		"any pattern may allow": {
			patterns: []string{"a:*", "re:b:[0-9]+"},
			allowed:  []string{"a:1", "b:22"},
			refused:  []string{"c:1", "b:x"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			p, err := ParseImagePatterns(tt.patterns)
			if err != nil {
				t.Fatal(err)
			}
			for _, img := range tt.allowed {
				if !p.Allows(img) {
					t.Errorf("%q should be allowed by %v", img, tt.patterns)
				}
			}
			for _, img := range tt.refused {
				if p.Allows(img) {
					t.Errorf("%q should be refused by %v", img, tt.patterns)
				}
			}
		})
	}
}

func TestParseImagePatternsRefusesBadOnes(t *testing.T) {
	for _, bad := range [][]string{{"["}, {"re:("}, {""}} {
		if _, err := ParseImagePatterns(bad); err == nil {
			t.Errorf("ParseImagePatterns(%q) should fail", bad)
		}
	}
	p, err := ParseImagePatterns([]string{"a:*", "re:b|c"})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.String(); got != "a:*, re:b|c" {
		t.Errorf("String() = %q", got)
	}
}

func TestValidatePodBugger(t *testing.T) {
	images, err := ParseImagePatterns([]string{"busybox:*"})
	if err != nil {
		t.Fatal(err)
	}
	enabled := map[string]string{debugv1alpha1.NamespaceEnabledLabel: "true"}
	valid := func() *debugv1alpha1.PodBugger {
		return &debugv1alpha1.PodBugger{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "dbg"},
			Spec: debugv1alpha1.PodBuggerSpec{
				Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Image:    "busybox:1.37",
				Profile:  debugv1alpha1.ProfileRestricted,
			},
		}
	}
	tests := map[string]struct {
		mutate    func(*debugv1alpha1.PodBugger)
		nsLabels  map[string]string
		policy    Policy
		badFields []string
	}{
		"valid":                       {nsLabels: enabled},
		"namespace without the label": {badFields: []string{"metadata.namespace"}},
		"namespace label is not true": {nsLabels: map[string]string{debugv1alpha1.NamespaceEnabledLabel: "yes"}, badFields: []string{"metadata.namespace"}},
		"image off the allow-list":    {nsLabels: enabled, mutate: func(pb *debugv1alpha1.PodBugger) { pb.Spec.Image = "evil:1" }, badFields: []string{"spec.image"}},
		"general without the flag":    {nsLabels: enabled, mutate: func(pb *debugv1alpha1.PodBugger) { pb.Spec.Profile = debugv1alpha1.ProfileGeneral }, badFields: []string{"spec.profile"}},
		"general with the flag":       {nsLabels: enabled, policy: Policy{AllowGeneralProfile: true}, mutate: func(pb *debugv1alpha1.PodBugger) { pb.Spec.Profile = debugv1alpha1.ProfileGeneral }},
		"baseline needs no flag":      {nsLabels: enabled, mutate: func(pb *debugv1alpha1.PodBugger) { pb.Spec.Profile = debugv1alpha1.ProfileBaseline }},
		"a bad selector":              {nsLabels: enabled, mutate: func(pb *debugv1alpha1.PodBugger) { pb.Spec.Selector.MatchLabels = map[string]string{"bad key!": "x"} }, badFields: []string{"spec.selector.matchLabels"}},
		"every problem is reported at once": {mutate: func(pb *debugv1alpha1.PodBugger) {
			pb.Spec.Image = "evil:1"
			pb.Spec.Profile = debugv1alpha1.ProfileGeneral
		}, badFields: []string{"metadata.namespace", "spec.image", "spec.profile"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			pb := valid()
			if tt.mutate != nil {
				tt.mutate(pb)
			}
			policy := tt.policy
			policy.AllowedImages = images
			errs := ValidatePodBugger(pb, tt.nsLabels, policy)
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
	images, err := ParseImagePatterns([]string{"busybox:*", `re:quay\.io/.+`})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, image, profile, key, value, label string) {
		pb := &debugv1alpha1.PodBugger{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "dbg"},
			Spec: debugv1alpha1.PodBuggerSpec{
				Selector: metav1.LabelSelector{MatchLabels: map[string]string{key: value}},
				Image:    image, Profile: debugv1alpha1.Profile(profile),
			},
		}
		errs := ValidatePodBugger(pb, map[string]string{debugv1alpha1.NamespaceEnabledLabel: label}, Policy{AllowedImages: images})
		// Whatever the input, an accepted PodBugger satisfies the policy.
		if len(errs) == 0 && (!images.Allows(image) || label != "true" || profile == string(debugv1alpha1.ProfileGeneral)) {
			t.Fatalf("accepted %+v", pb.Spec)
		}
	})
}
