package policy

import "testing"

func TestImagePatterns(t *testing.T) {
	tests := map[string]struct {
		patterns []string
		allowed  []string
		refused  []string
	}{
		"empty allows nothing": {
			refused: []string{"busybox", "docker.io/library/busybox:1.37", ""},
		},
		"a glob's star does not cross a slash": {
			patterns: []string{"registry.example.com/debug/*"},
			allowed:  []string{"registry.example.com/debug/tools:1.2", "registry.example.com/debug/tools@sha256:abc"},
			refused: []string{"registry.example.com/debug/x/y:1", "registry.example.com.evil.io/debug/tools",
				"evil.io/registry.example.com/debug/tools", "registry.example.com/debugger/tools"},
		},
		"a tag glob": {
			patterns: []string{"docker.io/library/busybox:*"},
			allowed:  []string{"docker.io/library/busybox:1.37", "docker.io/library/busybox:latest"},
			refused:  []string{"busybox:1.37", "docker.io/library/busybox", "docker.io/library/busybox:1.37/../../evil"},
		},
		"an exact image": {
			patterns: []string{"busybox:1.37"},
			allowed:  []string{"busybox:1.37"},
			refused:  []string{"busybox:1.36", "busybox:1.37x"},
		},
		"a regexp must match the whole image": {
			patterns: []string{`re:(docker\.io/library/)?busybox:1\.3[0-9]`},
			allowed:  []string{"busybox:1.37", "docker.io/library/busybox:1.30"},
			refused:  []string{"busybox:1.37-evil", "evil/busybox:1.37", "busybox:1.4"},
		},
		"any pattern may allow": {
			patterns: []string{"a:*", "re:b:[0-9]+"},
			allowed:  []string{"a:1", "b:22"},
			refused:  []string{"c:1", "b:x"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			p, err := ParseImagePatterns(tt.patterns)
			if err != nil {
				t.Fatal(err)
			}
			for _, img := range tt.allowed {
				if !p.Allows(img) {
					t.Errorf("%q should be allowed by %v", img, tt.patterns)
				}
			}
			for _, img := range tt.refused {
				if p.Allows(img) {
					t.Errorf("%q should be refused by %v", img, tt.patterns)
				}
			}
		})
	}
}

func TestParseImagePatternsRefusesBadOnes(t *testing.T) {
	for _, bad := range [][]string{{"["}, {"re:("}, {""}} {
		if _, err := ParseImagePatterns(bad); err == nil {
			t.Errorf("ParseImagePatterns(%q) should fail", bad)
		}
	}
	p, err := ParseImagePatterns([]string{"a:*", "re:b|c"})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.String(); got != "a:*, re:b|c" {
		t.Errorf("String() = %q", got)
	}
}
