package redact

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// canaries are 50 secrets as applications really print them: each line
// holds one canary value, which must not survive redaction. secretEnv
// values are known to the caller (a pod's env from a Secret).
func canaries() (lines, secrets, secretEnv []string) {
	add := func(secret, line string) {
		secrets = append(secrets, secret)
		lines = append(lines, strings.ReplaceAll(line, "%s", secret))
	}
	for i := range 5 {
		jwt := fmt.Sprintf("eyJhbGciOiJSUzI1NiIsImtpZCI6Ik%d.eyJpc3MiOiJrdWJlcm5ldGVzL3NlcnZpY2VhY2NvdW50Ii%d.c2lnbmF0dXJlLXBhcnQtb2YtdGhlLXRva2Vu%d", i, i, i)
		add(jwt, []string{
			"GET /api HTTP/1.1 Authorization: Bearer %s",
			"using service account token %s",
			`{"level":"debug","token":"%s"}`,
			"curl -H 'Authorization: Bearer %s' https://kubernetes.default.svc",
			"refresh_token=%s",
		}[i])
	}
	for i := range 5 {
		add(fmt.Sprintf("AKIAIOSFODNN7EXAMPL%d", i), []string{
			"aws configured with key %s",
			"AWS_ACCESS_KEY_ID=%s",
			`{"accessKeyId":"%s","region":"eu-west-1"}`,
			"credentials: %s (from env)",
			"s3 client %s/eu-central-1",
		}[i])
	}
	for i := range 5 {
		add(fmt.Sprintf("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKE%d", i), []string{
			"aws_secret_access_key = %s",
			"AWS_SECRET_ACCESS_KEY=%s",
			`secret_key: "%s"`,
			"--secret-key=%s",
			`{"secretAccessKey": "%s"}`,
		}[i])
	}
	for i := range 5 {
		add(fmt.Sprintf("hunter2-Pa55w0rd-%d", i), []string{
			"connecting with password=%s",
			`DB_PASSWORD="%s"`,
			"login user=admin pwd=%s",
			"postgres://app:%s@db.internal:5432/orders",
			`{"user":"admin","password":"%s"}`,
		}[i])
	}
	for i := range 5 {
		add(fmt.Sprintf("ghp_%036d", i), "cloning with token %s")
		secrets[len(secrets)-1] = fmt.Sprintf("ghp_%036d", i)
		lines[len(lines)-1] = fmt.Sprintf("git clone https://x-access-token:ghp_%036d@github.com/org/repo", i)
	}
	for i := range 5 {
		add(fmt.Sprintf("xoxb-1234567890-abcdefghij%d", i), "posting to slack with %s")
	}
	for i := range 5 {
		add(fmt.Sprintf("AIzaSyA-1234567890abcdefghijklmnopqrst%d", i), "maps key %s loaded")
	}
	for i := range 5 {
		add(fmt.Sprintf("MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC%d", i),
			"-----BEGIN PRIVATE KEY-----\n%s\nMIIEpAIBAAKCAQEA7\n-----END PRIVATE KEY-----")
	}
	for i := range 5 {
		v := fmt.Sprintf("s3cr3t-from-k8s-%d", i)
		secretEnv = append(secretEnv, v)
		add(v, []string{
			"starting with config %s",
			"env dump: X=%s",
			"the value is %s, retrying",
			"panic: bad key %s",
			"%s",
		}[i])
	}
	for i := range 5 {
		add(fmt.Sprintf("sk_live_%024d", i), []string{
			"stripe api_key=%s",
			"API_KEY: %s",
			"apikey=%s&q=1",
			`client_secret: '%s'`,
			"X-Auth-Token: %s",
		}[i])
	}
	return lines, secrets, secretEnv
}

func TestNoCanaryLeaks(t *testing.T) {
	lines, secrets, env := canaries()
	if len(secrets) != 50 {
		t.Fatalf("%d canaries, want 50", len(secrets))
	}
	r := New(nil, env)
	for i, line := range lines {
		got, n := r.Redact(line)
		if strings.Contains(got, secrets[i]) || n == 0 {
			t.Errorf("canary %d leaked (%d replaced):\n  in:  %s\n  out: %s", i, n, line, got)
		}
		if !strings.Contains(got, "[REDACTED:") {
			t.Errorf("canary %d: no marker says what was removed: %s", i, got)
		}
	}
	// All at once, as a log tail holds them.
	got, _ := r.Redact(strings.Join(lines, "\n"))
	for _, s := range secrets {
		if strings.Contains(got, s) {
			t.Errorf("canary %s leaked from the whole tail", s)
		}
	}
}

// benign is what logs say without a credential in them: none of it may be
// changed, beyond 1% of the lines.
func benign() []string {
	out := make([]string, 0, 600)
	for i := range 40 {
		out = append(out,
			fmt.Sprintf(`10.0.%d.7 - - [29/Nov/2026:07:%02d:01 +0000] "GET /api/v1/orders?page=%d HTTP/1.1" 200 %d "-" "curl/8.5.0"`, i, i, i, 512+i),
			fmt.Sprintf(`{"level":"info","ts":"2026-11-29T07:%02d:00Z","msg":"processed batch","batch":%d,"tokens":%d,"token_count":%d,"duration_ms":%d}`, i, i, 100+i, 30+i, 12+i),
			fmt.Sprintf("I1129 07:%02d:00.123456       1 controller.go:%d] Reconciling Deployment default/web-%d", i, 100+i, i),
			fmt.Sprintf("E1129 07:%02d:01.000000       1 reflector.go:%d] secret \"db-credentials-%d\" not found", i, 200+i, i),
			fmt.Sprintf("password reset email sent to user %d", 1000+i),
			fmt.Sprintf("java.lang.IllegalStateException: token bucket empty for client-%d", i),
			fmt.Sprintf("\tat com.example.auth.TokenValidator.validate(TokenValidator.java:%d)", 40+i),
			fmt.Sprintf("goroutine %d [running]:", i),
			fmt.Sprintf("main.(*Server).handleLogin(0xc000%04x, {0x1234, 0x5678})", i),
			fmt.Sprintf("authentication succeeded for user alice-%d via oidc", i),
			fmt.Sprintf("loaded secret key ring with %d keys", i),
			fmt.Sprintf("GET /healthz 200 %dms", i),
			fmt.Sprintf("sha256:%064x", i),
			fmt.Sprintf("image docker.io/library/busybox:1.%d pulled", i),
			fmt.Sprintf("next page token is empty after %d items", i),
		)
	}
	return out
}

func TestABenignCorpusKeepsItsLines(t *testing.T) {
	lines := benign()
	_, _, env := canaries()
	r := New(nil, env)
	changed := 0
	for _, l := range lines {
		if got, _ := r.Redact(l); got != l {
			changed++
			t.Logf("changed: %s\n      to: %s", l, got)
		}
	}
	if float64(changed) > 0.01*float64(len(lines)) {
		t.Errorf("%d of %d benign lines changed (%.1f%%), want under 1%%", changed, len(lines), 100*float64(changed)/float64(len(lines)))
	}
}

func TestUserPatternsAndShortValues(t *testing.T) {
	r := New([]*regexp.Regexp{regexp.MustCompile(`ORDER-\d{6}`)}, []string{"abc", "long-enough"})
	got, n := r.Redact("order ORDER-123456 of abc with long-enough")
	if want := "order [REDACTED:pattern] of abc with [REDACTED:secret-env]"; got != want || n != 2 {
		t.Errorf("got %q (%d), want %q (2)", got, n, want)
	}
}

func TestARedactedTextIsStable(t *testing.T) {
	lines, _, env := canaries()
	r := New(nil, env)
	once, _ := r.Redact(strings.Join(lines, "\n"))
	twice, n := r.Redact(once)
	if twice != once || n != 0 {
		t.Errorf("redacting twice changed the text (%d more): a marker was taken for a credential", n)
	}
}

// A private key cut off by the tail (no END line) goes to the end.
func TestACutPrivateKeyGoesToTheEnd(t *testing.T) {
	got, _ := New(nil, nil).Redact("starting\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7abc\nMIIE")
	if got != "starting\n[REDACTED:private-key]" {
		t.Errorf("got %q", got)
	}
}

// A tail cut inside a private key keeps none of its body; one cut inside a
// line loses that line, which may hold a value whose key was cut off.
func TestACutTailKeepsNoPartOfACredential(t *testing.T) {
	key := "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC8\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC9\n-----END PRIVATE KEY-----\n"
	log := "starting\n" + key + "listening on :8080\n"
	for cut := 1; cut < len(log)-1; cut++ {
		got := Tail(log[cut:], true)
		for _, body := range []string{"AoIBAQC7", "AoIBAQC8", "AoIBAQC9"} {
			if strings.Contains(log[cut:], body) && strings.Contains(got, body) {
				t.Fatalf("cut at %d: key body %s kept:\n%s", cut, body, got)
			}
		}
	}
	if got := Tail("er2hunter2\nnext line\n", true); got != "next line\n" {
		t.Errorf("a cut line was kept: %q", got)
	}
	if got := Tail("whole line\n", false); got != "whole line\n" {
		t.Errorf("an uncut log lost its first line: %q", got)
	}
}

// A secret value that contains another is removed whole, whatever order
// the values come in; a value of four bytes is removed, a shorter one is
// not.
func TestSecretValuesLongestFirstFromFourBytes(t *testing.T) {
	r := New(nil, []string{"hunter2", "hunter2-extra", "abcd", "xyz"})
	got, n := r.Redact("pw hunter2-extra, pin abcd, tag xyz")
	if want := "pw [REDACTED:secret-env], pin [REDACTED:secret-env], tag xyz"; got != want || n != 2 {
		t.Errorf("got %q (%d), want %q (2)", got, n, want)
	}
}

// A credential named by its key keeps the key, so a reader sees what was
// removed.
func TestAKeyedCredentialKeepsItsKey(t *testing.T) {
	for in, want := range map[string]string{
		"login password=hunter22 ok":             "login password=[REDACTED:secret-value] ok",
		"Authorization: Bearer abcdefgh12345678": "Authorization: Bearer [REDACTED:bearer-token]",
		"dial postgres://app:s3cr3t@db:5432/x":   "dial postgres://app:[REDACTED:url-password]@db:5432/x",
	} {
		if got := String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
}

// A cut read whose first line is empty loses only that empty line.
func TestDropCutLineOfAnEmptyFirstLine(t *testing.T) {
	if got := DropCutLine("\nnext line\n", true); got != "next line\n" {
		t.Errorf("got %q, want %q", got, "next line\n")
	}
}
