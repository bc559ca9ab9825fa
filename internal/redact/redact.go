// Package redact removes credentials from text before Deckhand stores or
// sends it: the log tails, termination messages and Event notes that
// PodIncidents and JobWatcher failure records keep. Logs often carry tokens
// and passwords, and a record lives in etcd, where encryption at rest
// usually covers only Secrets.
//
// A Redactor replaces what its detectors find with a marker that says what
// was removed, as "[REDACTED:bearer-token]". Three sources feed it: the
// built-in detectors (common credential shapes), patterns a user adds (RE2,
// compiled and bounded by the caller), and exact values the caller knows to
// be secret (the values of a pod's environment taken from Secrets). Its cost
// is linear in the text for each detector (RE2 never backtracks).
package redact

import (
	"regexp"
	"slices"
	"strings"
)

// Marker is what replaces a removed credential of the given kind.
func Marker(kind string) string { return "[REDACTED:" + kind + "]" }

// Kinds of what is removed, as the marker names them.
//
//nolint:gosec // names of what is removed, not credentials
const (
	KindPrivateKey    = "private-key"
	KindBearerToken   = "bearer-token"
	KindJWT           = "jwt"
	KindAWSAccessKey  = "aws-access-key"
	KindGCPAPIKey     = "gcp-api-key"
	KindGitHubToken   = "github-token"
	KindSlackToken    = "slack-token"
	KindURLPassword   = "url-password"
	KindAssignment    = "secret-value"
	KindSecretEnv     = "secret-env"
	KindUserPattern   = "pattern"
	minSecretValueLen = 4
)

// detector finds one kind of credential. keep is the number of leading
// submatches kept before the marker (a key name, "Bearer "); the rest of
// the match is replaced.
type detector struct {
	kind string
	re   *regexp.Regexp
	// keep is the index of the submatch that ends what is kept, 0 for none.
	keep int
}

// builtins are the credential shapes every Redactor removes, in the order
// they are applied: whole blocks first, then tokens with a recognisable
// shape, then values named by their key.
var builtins = []detector{
	// A PEM private key, to its END line or, cut off in a tail, to the end.
	{KindPrivateKey, regexp.MustCompile(`-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY-----(?s:.*?)(?:-----END ((?:[A-Z0-9]+ )*)PRIVATE KEY-----|\z)`), 0},
	// The end of one whose beginning a tail cut off: the text starts in
	// its body (base64 lines, PEM headers) and goes to its END line.
	{KindPrivateKey, regexp.MustCompile(`\A(?:[A-Za-z0-9+/=]*|[A-Za-z-]+: [^\n]*)(?:\n(?:[A-Za-z0-9+/=]*|[A-Za-z-]+: [^\n]*))*\n?-----END ((?:[A-Z0-9]+ )*)PRIVATE KEY-----`), 0},
	// JSON Web Tokens, Kubernetes ServiceAccount tokens among them.
	{KindJWT, regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`), 0},
	// A bearer token, and an Authorization header's credentials whatever
	// their scheme.
	{KindBearerToken, regexp.MustCompile(`(?i)(\bbearer\s+|\bauthorization["']?\s*[:=]\s*(?:[a-z]+\s+)?)[A-Za-z0-9._~+/=-]{8,}`), 1},
	{KindAWSAccessKey, regexp.MustCompile(`\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b`), 0},
	{KindGCPAPIKey, regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}\b`), 0},
	{KindGitHubToken, regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})\b`), 0},
	{KindSlackToken, regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{10,}`), 0},
	// scheme://user:password@host
	{KindURLPassword, regexp.MustCompile(`(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@]+:)[^\s@/]+@`), 1},
	// password=..., "secret": "...", api_key: ..., --token=..., and keys
	// ending so (DB_PASSWORD, secretAccessKey): the key and its separator
	// are kept, the value goes (quoted or to the next
	// space, comma or closing brace).
	{KindAssignment, regexp.MustCompile(`(?i)(\b[\w-]*?(?:password|passwd|pwd|passphrase|secret|client[_-]?secret|secret[_-]?key|api[_-]?key|apikey|access[_-]?key|access[_-]?token|auth[_-]?token|refresh[_-]?token|private[_-]?key|token|credentials?)["']?\s*(?:[:=]|=>)\s*)("[^"\n]*"|'[^'\n]*'|[^\s,;}&"']+)`), 1},
}

// Redactor removes credentials from text. The zero value is unusable; use
// New.
type Redactor struct {
	detectors []detector
	// values are the exact secret values, longest first, so that a value
	// containing another is removed whole.
	values []string
}

// New returns a Redactor with the built-in detectors, the user's patterns
// (every match removed whole) and the exact secret values (those shorter
// than four bytes are left: they would remove ordinary words and digits
// everywhere, and hide little).
func New(patterns []*regexp.Regexp, values []string) *Redactor {
	r := &Redactor{detectors: slices.Clone(builtins)}
	for _, re := range patterns {
		r.detectors = append(r.detectors, detector{kind: KindUserPattern, re: re})
	}
	return r.With(values)
}

// With is r removing the exact secret values too, beside what r removes; r
// is left as it was (its compiled patterns are shared, not copied).
func (r *Redactor) With(values []string) *Redactor {
	out := &Redactor{detectors: r.detectors, values: slices.Clone(r.values)}
	for _, v := range values {
		if len(v) >= minSecretValueLen && !slices.Contains(out.values, v) {
			out.values = append(out.values, v)
		}
	}
	slices.SortFunc(out.values, func(a, b string) int { return len(b) - len(a) })
	return out
}

// Redact returns text with every credential its detectors find replaced
// by its marker, and how many were replaced.
func (r *Redactor) Redact(text string) (string, int) {
	n := 0
	for _, v := range r.values {
		if c := strings.Count(text, v); c > 0 {
			text = strings.ReplaceAll(text, v, Marker(KindSecretEnv))
			n += c
		}
	}
	for _, d := range r.detectors {
		text = d.replace(text, &n)
	}
	return text, n
}

// replace replaces d's matches in text, keeping the submatch d.keep, and
// adds their number to n. A match that is already a marker is left.
func (d detector) replace(text string, n *int) string {
	idx := d.re.FindAllStringSubmatchIndex(text, -1)
	if idx == nil {
		return text
	}
	var b strings.Builder
	b.Grow(len(text))
	last := 0
	for _, m := range idx {
		start := m[0]
		if d.keep > 0 && m[2*d.keep+1] >= 0 {
			start = m[2*d.keep+1]
		}
		if strings.HasPrefix(text[start:m[1]], "[REDACTED:") {
			continue
		}
		b.WriteString(text[last:start])
		b.WriteString(Marker(d.kind))
		if d.kind == KindURLPassword {
			b.WriteByte('@')
		}
		last = m[1]
		*n++
	}
	b.WriteString(text[last:])
	return b.String()
}

// builtin is the Redactor of the built-in detectors alone.
var builtin = New(nil, nil)

// String is text with what the built-in detectors find removed: for text
// whose owner added no patterns and whose secret values are not known.
func String(text string) string {
	out, _ := builtin.Redact(text)
	return out
}

// Tail is the end of a log as Deckhand keeps it: when the read was cut
// (truncated), its first line, which may begin inside a credential whose
// key was cut off, is dropped (DropCutLine); then credentials are removed
// (String).
func Tail(log string, truncated bool) string {
	return String(DropCutLine(log, truncated))
}

// DropCutLine is a log read without its first line when the read was cut
// (truncated): that line may begin inside a credential whose key was cut
// off, which no detector would recognise.
func DropCutLine(log string, truncated bool) string {
	if !truncated {
		return log
	}
	if i := strings.IndexByte(log, '\n'); i >= 0 {
		return log[i+1:]
	}
	return ""
}
