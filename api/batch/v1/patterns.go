package v1

import "regexp"

// CompilePattern compiles one of a watcher's RE2 patterns (jobNamePatterns,
// namespacePatterns and their exclusions) as it is matched: against the
// whole name, so "team-.*" matches "team-a" but not "my-team-a". The
// admission webhook and the controller both call it, so a pattern admitted
// is a pattern the controller can use. A bad pattern's error is the RE2
// compiler's message for the pattern as written.
func CompilePattern(pattern string) (*regexp.Regexp, error) {
	if _, err := regexp.Compile(pattern); err != nil {
		return nil, err
	}
	return regexp.Compile(`^(?:` + pattern + `)$`)
}
