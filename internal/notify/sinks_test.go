package notify

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSinksFile(t *testing.T) {
	s, err := ParseSinks([]byte(`
sinks:
- name: oncall
  format: Slack
  url: https://hooks.example.com/services/T0/B0/secret
- name: team-a-hook
  url: https://hooks.example.com/a
  token: t0ken
  namespaces: [team-a]
`))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.For("team-b", "oncall"); err != nil || got.Format != FormatSlack || got.Name != "oncall" {
		t.Fatalf("oncall for team-b: %+v, %v", got, err)
	}
	if got, err := s.For("team-a", "team-a-hook"); err != nil || got.Format != FormatJSON || got.Token != "t0ken" {
		t.Fatalf("team-a-hook for team-a: %+v, %v", got, err)
	}
	for _, c := range []struct{ ns, name string }{{"team-b", "team-a-hook"}, {"team-a", "nobody"}} {
		if _, err := s.For(c.ns, c.name); !errors.Is(err, ErrUnknownSink) {
			t.Errorf("%s for %s: %v, want ErrUnknownSink", c.name, c.ns, err)
		}
	}
}

// A bad sinks file is refused with the field at fault named, and never
// with a URL repeated (a webhook's URL is often its secret).
func TestABadSinksFileNamesTheField(t *testing.T) {
	for file, want := range map[string]string{
		"sinks:\n- name: Oncall\n  url: https://h/x":                                   "sinks[0].name",
		"sinks:\n- name: a\n  url: https://h/x\n- name: a\n  url: https://h/y":         "sinks[1].name: \"a\" is named twice",
		"sinks:\n- name: a\n  url: https://h/x\n  format: XML":                         "sinks[0].format",
		"sinks:\n- name: a\n  url: ftp://h/secret-path":                                "sinks[0].url: the scheme must be https (or http), not \"ftp\"",
		"sinks:\n- name: a\n  url: https://user:secret-pass@h/x":                       "sinks[0].url: credentials in the URL",
		"sinks:\n- name: a\n  url: /secret-path":                                       "sinks[0].url: the scheme",
		"sinks:\n- name: a\n  url: https://h/x\n  namespaces: [ok, Not_OK]":            "sinks[0].namespaces[1]",
		"sinks:\n- name: a\n  url: https://h/x\n  tokn: x":                             "unknown field",
		"sinks:\n- name: a\n  url: https://h/x\n  token: " + strings.Repeat("x", 5000): "sinks[0].token: over 4096 bytes",
	} {
		_, err := ParseSinks([]byte(file))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want it to say %q", file, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: the error repeats the URL: %v", file, err)
		}
	}
}

func TestLoadSinksBoundsTheFile(t *testing.T) {
	if s, err := LoadSinks(""); err != nil || len(s) != 0 {
		t.Fatalf("no file: %v, %v", s, err)
	}
	path := filepath.Join(t.TempDir(), "sinks.yaml")
	if err := os.WriteFile(path, []byte("# "+strings.Repeat("x", 70<<10)+"\nsinks: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSinks(path); err == nil || !strings.Contains(err.Error(), "over 65536 bytes") {
		t.Fatalf("a 70 KiB file: %v", err)
	}
}
