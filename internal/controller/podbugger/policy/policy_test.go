package policy

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
)

func TestChecks(t *testing.T) {
	images, err := ParseImagePatterns([]string{"busybox:*"})
	if err != nil {
		t.Fatal(err)
	}
	enabled := map[string]string{debugv1beta1.NamespaceEnabledLabel: "true"}
	input := func(image string, profile debugv1beta1.Profile, nsLabels map[string]string, allowGeneral bool) Input {
		return Input{
			PodBugger: &debugv1beta1.PodBugger{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "dbg"},
				Spec:       debugv1beta1.PodBuggerSpec{Image: image, Profile: profile},
			},
			NamespaceLabels: nsLabels,
			Policy:          Policy{AllowedImages: images, AllowGeneralProfile: allowGeneral},
		}
	}
	tests := map[string]struct {
		check  Check
		in     Input
		reason string // empty: not violated
		field  string
	}{
		"opted-in namespace":          {check: NamespaceOptedIn, in: input("busybox:1", "", enabled, false)},
		"namespace without the label": {check: NamespaceOptedIn, in: input("busybox:1", "", nil, false), reason: debugv1beta1.ReasonNamespaceNotEnabled, field: "metadata.namespace"},
		"namespace label not true": {check: NamespaceOptedIn, in: input("busybox:1", "", map[string]string{debugv1beta1.NamespaceEnabledLabel: "yes"}, false),
			reason: debugv1beta1.ReasonNamespaceNotEnabled, field: "metadata.namespace"},
		"allowed image":            {check: ImageAllowed, in: input("busybox:1", "", enabled, false)},
		"image off the list":       {check: ImageAllowed, in: input("evil:1", "", enabled, false), reason: debugv1beta1.ReasonImageNotAllowed, field: "spec.image"},
		"restricted profile":       {check: ProfileAllowed, in: input("busybox:1", debugv1beta1.ProfileRestricted, enabled, false)},
		"baseline needs no flag":   {check: ProfileAllowed, in: input("busybox:1", debugv1beta1.ProfileBaseline, enabled, false)},
		"general without the flag": {check: ProfileAllowed, in: input("busybox:1", debugv1beta1.ProfileGeneral, enabled, false), reason: debugv1beta1.ReasonProfileNotAllowed, field: "spec.profile"},
		"general with the flag":    {check: ProfileAllowed, in: input("busybox:1", debugv1beta1.ProfileGeneral, enabled, true)},
		"no runAsUser":             {check: UserNotRoot, in: input("busybox:1", "", enabled, false)},
		"runAsUser 1000":           {check: UserNotRoot, in: withUser(input("busybox:1", "", enabled, false), 1000)},
		"runAsUser 1":              {check: UserNotRoot, in: withUser(input("busybox:1", "", enabled, false), 1)},
		"runAsUser 0 (root)":       {check: UserNotRoot, in: withUser(input("busybox:1", "", enabled, false), 0), reason: debugv1beta1.ReasonRootUser, field: "spec.runAsUser"},
		"runAsUser -1":             {check: UserNotRoot, in: withUser(input("busybox:1", "", enabled, false), -1), reason: debugv1beta1.ReasonRootUser, field: "spec.runAsUser"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			v, violated := tt.check(tt.in)
			if violated != (tt.reason != "") {
				t.Fatalf("violated = %v, want %v (%+v)", violated, tt.reason != "", v)
			}
			if violated && (v.Reason != tt.reason || v.Err == nil || v.Err.Field != tt.field) {
				t.Errorf("violation %s %v, want %s on %s", v.Reason, v.Err, tt.reason, tt.field)
			}
		})
	}
}

func TestRulesReportEveryViolationInOrder(t *testing.T) {
	pb := &debugv1beta1.PodBugger{Spec: debugv1beta1.PodBuggerSpec{Image: "evil:1", Profile: debugv1beta1.ProfileGeneral}}
	violations := (Policy{}).Violations(pb, nil)
	reasons := make([]string, 0, len(violations))
	for _, v := range violations {
		reasons = append(reasons, v.Reason)
	}
	want := []string{debugv1beta1.ReasonNamespaceNotEnabled, debugv1beta1.ReasonImageNotAllowed, debugv1beta1.ReasonProfileNotAllowed}
	if len(reasons) != len(want) {
		t.Fatalf("reasons %v, want %v", reasons, want)
	}
	for i := range want {
		if reasons[i] != want[i] {
			t.Errorf("reasons %v, want %v", reasons, want)
		}
	}
}

func withUser(in Input, user int64) Input {
	in.PodBugger.Spec.RunAsUser = &user
	return in
}

// A PodBugger's redaction patterns compile unanchored, and each one that
// costs too much, alone or with those before it, is refused before it is
// compiled, naming its field.
func TestRedactPatterns(t *testing.T) {
	pb := func(patterns ...string) *debugv1beta1.PodBugger {
		return &debugv1beta1.PodBugger{Spec: debugv1beta1.PodBuggerSpec{Incidents: &debugv1beta1.IncidentPolicy{Redact: patterns}}}
	}
	res, errs := RedactPatterns(pb(`CUST-[0-9]{6}`, `internal-token-\w+`))
	if len(errs) != 0 || len(res) != 2 || !res[0].MatchString("order for CUST-123456 failed") {
		t.Fatalf("got %v, %v", res, errs)
	}
	bomb := "(?:" + strings.Repeat("a", 240) + "){100}"
	half := "(?:" + strings.Repeat("b", 200) + "){9}" // about 1,800 instructions: two fit, the third does not
	for name, c := range map[string]struct {
		patterns []string
		field    string
		says     string
	}{
		"a regex bomb":      {[]string{"ok", bomb}, "spec.incidents.redact[1]", "compiles to more than 2048 instructions"},
		"too many together": {[]string{half, half, half}, "spec.incidents.redact[2]", "with the patterns before it"},
		"Unicode classes":   {[]string{strings.Repeat(`\pL`, 5)}, "spec.incidents.redact[0]", "runes"},
		"classes too many together": {[]string{`\pL\pL\pL`, `\pN\pN\pN`}, "spec.incidents.redact[1]",
			"with the patterns before it, the PodBugger's character classes cost more than 16384 runes"},
		"one RE2 does not take": {[]string{`(?<name>x)`, `a(`}, "spec.incidents.redact[1]", "missing closing )"},
	} {
		_, errs := RedactPatterns(pb(c.patterns...))
		if len(errs) != 1 || errs[0].Field != c.field || !strings.Contains(errs[0].Error(), c.says) {
			t.Errorf("%s: %v, want one error on %s saying %q", name, errs, c.field, c.says)
		}
	}
}

// A refused image's message shows the allow-list, and says so when it is
// empty.
func TestImageRefusalShowsTheAllowList(t *testing.T) {
	images, err := ParseImagePatterns([]string{"busybox:*"})
	if err != nil {
		t.Fatal(err)
	}
	pb := &debugv1beta1.PodBugger{Spec: debugv1beta1.PodBuggerSpec{Image: "evil:1"}}
	for want, p := range map[string]Policy{
		"(--podbugger-allowed-images: busybox:*)":                  {AllowedImages: images},
		"(--podbugger-allowed-images: empty: no image is allowed)": {},
	} {
		v, violated := ImageAllowed(Input{PodBugger: pb, Policy: p})
		if !violated || !strings.Contains(v.Err.Error(), want) {
			t.Errorf("violation %v, want one saying %s", v.Err, want)
		}
	}
}
