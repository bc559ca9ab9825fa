package v1alpha1

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	debugv1alpha1 "github.com/deckhand-dev/deckhand/api/debug/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/setup"
)

// RegexpPrefix marks an allow-list pattern as a regular expression rather
// than a glob.
const RegexpPrefix = "re:"

// ImagePatterns is the operator's image allow-list. An image is allowed when
// it matches at least one pattern; an empty list allows nothing.
//
// A pattern is a glob in the syntax of Go's path.Match, compared with the
// image exactly as the PodBugger writes it: `*` matches any run of characters
// except `/`, `?` one such character, `[...]` a class. So
// "registry.example.com/debug/*" allows "registry.example.com/debug/tools:1.2"
// but not "registry.example.com/debug/x/y:1" nor
// "registry.example.com.evil.io/debug/tools". A pattern that starts with "re:"
// is a Go regular expression that must match the whole image.
type ImagePatterns struct {
	globs   []string
	regexps []*regexp.Regexp
}

// ParseImagePatterns compiles the allow-list; each element is one pattern.
func ParseImagePatterns(patterns []string) (ImagePatterns, error) {
	var p ImagePatterns
	for _, s := range patterns {
		if expr, ok := strings.CutPrefix(s, RegexpPrefix); ok {
			re, err := regexp.Compile(`^(?:` + expr + `)$`)
			if err != nil {
				return ImagePatterns{}, fmt.Errorf("image pattern %q: %w", s, err)
			}
			p.regexps = append(p.regexps, re)
			continue
		}
		if s == "" {
			return ImagePatterns{}, fmt.Errorf("image pattern: must not be empty")
		}
		if _, err := path.Match(s, ""); err != nil {
			return ImagePatterns{}, fmt.Errorf("image pattern %q: %w", s, err)
		}
		p.globs = append(p.globs, s)
	}
	return p, nil
}

// Allows reports whether image matches a pattern.
func (p ImagePatterns) Allows(image string) bool {
	for _, g := range p.globs {
		if ok, _ := path.Match(g, image); ok { // patterns were checked when parsed
			return true
		}
	}
	for _, re := range p.regexps {
		if re.MatchString(image) {
			return true
		}
	}
	return false
}

// String lists the patterns as the flag takes them.
func (p ImagePatterns) String() string {
	all := append([]string{}, p.globs...)
	for _, re := range p.regexps {
		expr := strings.TrimSuffix(strings.TrimPrefix(re.String(), `^(?:`), `)$`)
		all = append(all, RegexpPrefix+expr)
	}
	return strings.Join(all, ", ")
}

// Policy is what the operator allows PodBuggers to do. The validating webhook
// refuses a PodBugger that breaks it, and the controller blocks one that does
// (the policy or the namespace may change after admission).
type Policy struct {
	// AllowedImages is the image allow-list (--podbugger-allowed-images).
	AllowedImages ImagePatterns
	// AllowGeneralProfile lets PodBuggers use the general profile, which adds
	// the SYS_PTRACE capability (--podbugger-allow-general-profile).
	AllowGeneralProfile bool
}

// Violation is one safety rule a PodBugger breaks.
type Violation struct {
	// Reason is the Blocked condition's reason for it.
	Reason string
	// Err names the field and says what is wrong.
	Err *field.Error
}

// Check returns the safety rules pb breaks, given the labels of its
// namespace; none means the controller may act on it.
func (p Policy) Check(pb *debugv1alpha1.PodBugger, namespaceLabels map[string]string) []Violation {
	var out []Violation
	if namespaceLabels[debugv1alpha1.NamespaceEnabledLabel] != "true" {
		out = append(out, Violation{debugv1alpha1.ReasonNamespaceNotEnabled, field.Forbidden(
			field.NewPath("metadata", "namespace"),
			fmt.Sprintf("namespace %q does not opt in to PodBuggers: it needs the label %s=true",
				pb.Namespace, debugv1alpha1.NamespaceEnabledLabel))})
	}
	if !p.AllowedImages.Allows(pb.Spec.Image) {
		allowed := p.AllowedImages.String()
		if allowed == "" {
			allowed = "empty: no image is allowed"
		}
		out = append(out, Violation{debugv1alpha1.ReasonImageNotAllowed, field.Forbidden(
			field.NewPath("spec", "image"),
			fmt.Sprintf("image %q is not on the operator's allow-list (--podbugger-allowed-images: %s)", pb.Spec.Image, allowed))})
	}
	if pb.Spec.Profile == debugv1alpha1.ProfileGeneral && !p.AllowGeneralProfile {
		out = append(out, Violation{debugv1alpha1.ReasonProfileNotAllowed, field.Forbidden(
			field.NewPath("spec", "profile"),
			"the general profile (adds SYS_PTRACE) needs the operator's --podbugger-allow-general-profile")})
	}
	return out
}

// PolicyFrom is the policy the operator set with its PodBugger flags.
func PolicyFrom(opts setup.Options) (Policy, error) {
	images, err := ParseImagePatterns(opts.PodBuggerAllowedImages)
	if err != nil {
		return Policy{}, fmt.Errorf("PodBugger image allow-list: %w", err)
	}
	return Policy{AllowedImages: images, AllowGeneralProfile: opts.PodBuggerAllowGeneralProfile}, nil
}
