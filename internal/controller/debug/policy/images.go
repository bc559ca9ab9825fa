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
			return ImagePatterns{}, errors.New("image pattern: must not be empty")
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
