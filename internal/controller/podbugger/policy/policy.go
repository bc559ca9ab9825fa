// Package policy is PodBugger's safety policy: the rules that decide whether
// a PodBugger may touch any pod at all. The validating webhook checks them
// when a PodBugger is created or its spec changes, and the controller checks
// them again before every injection, because the namespace label and the
// operator's flags may change after admission.
//
// Each rule is a named Check; Rules chains them. This is the shape of
// cert-manager's certificate policies, with one difference: Evaluate runs the
// whole chain instead of stopping at the first violation, because admission
// reports every problem at once. The controller reports the first.
//
// The package sits below both the webhook and the controller of PodBugger
// (it imports neither), next to the controller that enforces it all the time.
package policy

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/setupoptions"
)

// Policy is what the operator allows PodBuggers to do.
type Policy struct {
	// AllowedImages is the image allow-list (--podbugger-allowed-images).
	AllowedImages ImagePatterns
	// AllowGeneralProfile lets PodBuggers use the general profile, which adds
	// the SYS_PTRACE capability (--podbugger-allow-general-profile).
	AllowGeneralProfile bool
	// AllowHostAccess lets PodBuggers inject into pods that reach into their
	// node: host namespaces, privileged containers, host paths
	// (--podbugger-allow-host-access). Without it such pods are skipped.
	AllowHostAccess bool
}

// From is the policy the operator set with its PodBugger flags.
func From(opts setupoptions.Options) (Policy, error) {
	images, err := ParseImagePatterns(opts.PodBuggerAllowedImages)
	if err != nil {
		return Policy{}, fmt.Errorf("PodBugger image allow-list: %w", err)
	}
	return Policy{AllowedImages: images, AllowGeneralProfile: opts.PodBuggerAllowGeneralProfile,
		AllowHostAccess: opts.PodBuggerAllowHostAccess}, nil
}

// Violations returns the rules pb breaks, in the order of Rules, given the
// labels of its namespace; none means the controller may act on it. The
// rules are about what a PodBugger runs in pods: one that only records
// incidents (see Injects) reads what the failing pods' readers can read,
// runs nothing, and breaks none of them, opt-in included.
func (p Policy) Violations(pb *debugv1beta1.PodBugger, namespaceLabels map[string]string) []Violation {
	if !Injects(pb) {
		return nil
	}
	return Rules.Evaluate(Input{PodBugger: pb, NamespaceLabels: namespaceLabels, Policy: p})
}

// Input is what a Check looks at.
type Input struct {
	PodBugger *debugv1beta1.PodBugger
	// NamespaceLabels are the labels of the PodBugger's namespace.
	NamespaceLabels map[string]string
	// Policy is what the operator allows.
	Policy Policy
}

// Violation is one safety rule a PodBugger breaks.
type Violation struct {
	// Reason is the Blocked condition's reason for it.
	Reason string
	// Err names the field and says what is wrong, as admission reports it.
	Err *field.Error
}

// Check is one safety rule: it reports whether in breaks it and, if so,
// how. A check returns the field error rather than a bare message (as
// cert-manager's do) because admission must name the field.
type Check func(in Input) (v Violation, violated bool)

// Chain is a list of checks, evaluated in order.
type Chain []Check

// Evaluate returns the violation of every check in the chain that in breaks.
func (c Chain) Evaluate(in Input) []Violation {
	var out []Violation
	for _, check := range c {
		if v, violated := check(in); violated {
			out = append(out, v)
		}
	}
	return out
}

// Rules are PodBugger's safety rules. The order is the order in which they
// are reported: the first one broken is the Blocked condition's reason.
var Rules = Chain{NamespaceOptedIn, ImageAllowed, ProfileAllowed, UserNotRoot}

// NamespaceOptedIn checks that the PodBugger's namespace carries the label
// debug.deckhand.dev/enabled=true.
func NamespaceOptedIn(in Input) (Violation, bool) {
	if in.NamespaceLabels[debugv1beta1.NamespaceEnabledLabel] == "true" {
		return Violation{}, false
	}
	return Violation{debugv1beta1.ReasonNamespaceNotEnabled, field.Forbidden(
		field.NewPath("metadata", "namespace"),
		fmt.Sprintf("namespace %q does not opt in to PodBuggers: it needs the label %s=true",
			in.PodBugger.Namespace, debugv1beta1.NamespaceEnabledLabel))}, true
}

// ImageAllowed checks that spec.image matches the operator's allow-list.
func ImageAllowed(in Input) (Violation, bool) {
	images := in.Policy.AllowedImages
	if images.Allows(in.PodBugger.Spec.Image) {
		return Violation{}, false
	}
	allowed := images.String()
	if allowed == "" {
		allowed = "empty: no image is allowed"
	}
	return Violation{debugv1beta1.ReasonImageNotAllowed, field.Forbidden(
		field.NewPath("spec", "image"),
		fmt.Sprintf("image %q is not on the operator's allow-list (--podbugger-allowed-images: %s)", in.PodBugger.Spec.Image, allowed))}, true
}

// ProfileAllowed checks that the general profile is used only with the
// operator's --podbugger-allow-general-profile.
func ProfileAllowed(in Input) (Violation, bool) {
	if in.PodBugger.Spec.Profile != debugv1beta1.ProfileGeneral || in.Policy.AllowGeneralProfile {
		return Violation{}, false
	}
	return Violation{debugv1beta1.ReasonProfileNotAllowed, field.Forbidden(
		field.NewPath("spec", "profile"),
		"the general profile (adds SYS_PTRACE) needs the operator's --podbugger-allow-general-profile")}, true
}

// UserNotRoot checks that spec.runAsUser, when set, is not root. The v1beta1
// schema says so (minimum 1), but a PodBugger written as v1alpha1 carries
// runAsUser in its conversion-data annotation, which no schema checks: the
// rule holds here, where admission and the controller both apply it.
func UserNotRoot(in Input) (Violation, bool) {
	user := in.PodBugger.Spec.RunAsUser
	if user == nil || *user >= 1 {
		return Violation{}, false
	}
	return Violation{debugv1beta1.ReasonRootUser, field.Invalid(
		field.NewPath("spec", "runAsUser"), *user, "must be 1 or more: a debug container never runs as root")}, true
}
