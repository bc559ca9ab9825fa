package podset

import "testing"

func TestWithoutGeneratedName(t *testing.T) {
	tests := map[string]struct{ msg, want string }{
		"quota":                           {msg: `pods "web-x7k2p" is forbidden: exceeded quota: pods`, want: `pods "web-" is forbidden: exceeded quota: pods`},
		"already without":                 {msg: `pods "web-" is forbidden: unable to create new content`, want: `pods "web-" is forbidden: unable to create new content`},
		"another set's pod is left alone": {msg: `pods "webapp-x7k2p" is forbidden`, want: `pods "webapp-x7k2p" is forbidden`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := withoutGeneratedName(tc.msg, "web-"); got != tc.want {
				t.Errorf("withoutGeneratedName = %q, want %q", got, tc.want)
			}
		})
	}
}
