package policy

import (
	"regexp"
	"strings"
)

// The default registry, its legacy name, and the repository prefix of
// its official images, as the container runtimes resolve a familiar name:
// "busybox" is "docker.io/library/busybox:latest".
const (
	defaultDomain = "docker.io"
	legacyDomain  = "index.docker.io"
	officialRepo  = "library/"
	defaultTag    = "latest"
)

// The grammar of an image reference (github.com/distribution/reference),
// on the familiar form, before defaulting.
var referenceGrammar = func() *regexp.Regexp {
	const (
		alnum     = `[a-z0-9]+`
		separator = `(?:[._]|__|[-]+)`
		component = alnum + `(?:` + separator + alnum + `)*`
		domainPt  = `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
		domain    = `(?:` + domainPt + `(?:\.` + domainPt + `)*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?`
		tag       = `[\w][\w.-]{0,127}`
		digest    = `[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}`
	)
	return regexp.MustCompile(`^(?:` + domain + `/)?` + component + `(?:/` + component + `)*` +
		`(?::` + tag + `)?(?:@` + digest + `)?$`)
}()

// NormalizeImage returns the reference the container runtime pulls for
// image, in full: registry, repository, and the tag (latest when there is
// neither tag nor digest) or digest. "busybox:1.36" is
// "docker.io/library/busybox:1.36", "index.docker.io/foo/bar" is
// "docker.io/foo/bar:latest". False when image is not a valid reference.
func NormalizeImage(image string) (string, bool) {
	if len(image) > 4096 || !referenceGrammar.MatchString(image) {
		return "", false
	}
	return normalize(image, true), true
}

// normalizePattern writes a glob allow-list pattern in the form
// NormalizeImage gives, so that "busybox:*" allows "busybox:1.36" and
// "docker.io/library/busybox:1.36" alike. A pattern whose last part has
// neither tag, digest nor wildcard gets the default tag, as an image does.
func normalizePattern(pattern string) string {
	last := pattern[strings.LastIndex(pattern, "/")+1:]
	return normalize(pattern, !strings.ContainsAny(last, "*?["))
}

// normalize adds the default registry, its official repository prefix and,
// when tagless is true and there is no tag or digest, the default tag.
func normalize(ref string, tagless bool) string {
	name, suffix := ref, ""
	if i := strings.IndexByte(name, '@'); i >= 0 {
		name, suffix = ref[:i], ref[i:]
	}
	lastSlash := strings.LastIndex(name, "/")
	if i := strings.LastIndexByte(name, ':'); i > lastSlash {
		name, suffix = name[:i], ref[i:]
	}
	domain, path := defaultDomain, name
	if first, rest, ok := strings.Cut(name, "/"); ok && (strings.ContainsAny(first, ".:[") || first == "localhost" || strings.ToLower(first) != first) {
		domain, path = first, rest
	}
	if domain == legacyDomain {
		domain = defaultDomain
	}
	if domain == defaultDomain && !strings.Contains(path, "/") {
		path = officialRepo + path
	}
	if suffix == "" && tagless {
		suffix = ":" + defaultTag
	}
	return domain + "/" + path + suffix
}
