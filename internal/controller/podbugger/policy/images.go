package policy

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
)

// RegexpPrefix marks an allow-list pattern as a regular expression rather
// than a glob.
const RegexpPrefix = "re:"

// ImagePatterns is the operator's image allow-list. An image is allowed when
// it matches at least one pattern; an empty list allows nothing.
//
// Images and patterns are compared in full (NormalizeImage): registry,
// repository and tag or digest, as the container runtime resolves them, so
// "busybox:1.36", "docker.io/busybox:1.36" and
// "docker.io/library/busybox:1.36" are one image, and an image that is not
// a valid reference is allowed by nothing.
//
// A pattern is a glob in the syntax of Go's path.Match, written in full the
// same way before matching (a name without a registry is on docker.io, an
// official image's gets "library/", a last part without tag, digest or
// wildcard gets ":latest"): `*` matches any run of characters except `/`,
// `?` one such character, `[...]` a class. So "registry.example.com/debug/*"
// allows "registry.example.com/debug/tools:1.2" but not
// "registry.example.com/debug/x/y:1" nor
// "registry.example.com.evil.io/debug/tools", and "busybox:*" allows
// "docker.io/library/busybox:1.36". A pattern that starts with "re:" is a Go
// regular expression that must match the whole image in full
// ("docker.io/library/busybox:1.36"): a regular expression cannot be
// rewritten, so write it in full, with its dots escaped.
type ImagePatterns struct {
	// written are the patterns as the operator wrote them, for messages.
	written []string
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
			p.written = append(p.written, s)
			continue
		}
		if s == "" {
			return ImagePatterns{}, errors.New("image pattern: must not be empty")
		}
		if _, err := path.Match(s, ""); err != nil {
			return ImagePatterns{}, fmt.Errorf("image pattern %q: %w", s, err)
		}
		p.globs = append(p.globs, normalizePattern(s))
		p.written = append(p.written, s)
	}
	return p, nil
}

// Allows reports whether image, in full, matches a pattern.
func (p ImagePatterns) Allows(image string) bool {
	full, ok := NormalizeImage(image)
	if !ok {
		return false
	}
	for _, g := range p.globs {
		if ok, _ := path.Match(g, full); ok { // patterns were checked when parsed
			return true
		}
	}
	for _, re := range p.regexps {
		if re.MatchString(full) {
			return true
		}
	}
	return false
}

// String lists the patterns as the operator wrote them.
func (p ImagePatterns) String() string { return strings.Join(p.written, ", ") }
