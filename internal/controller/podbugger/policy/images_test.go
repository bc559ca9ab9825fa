package policy

import (
	"strings"
	"testing"
)

const (
	digest      = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	otherDigest = "sha256:1123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

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
			allowed:  []string{"registry.example.com/debug/tools:1.2", "registry.example.com/debug/tools@" + digest},
			refused: []string{"registry.example.com/debug/x/y:1", "registry.example.com.evil.io/debug/tools",
				"evil.io/registry.example.com/debug/tools", "registry.example.com/debugger/tools"},
		},
		// The seed's busybox:1.36 was refused by this pattern (seen on
		// make run): the same image, written short.
		"a tag glob allows the image however it is written": {
			patterns: []string{"docker.io/library/busybox:*"},
			allowed: []string{"docker.io/library/busybox:1.37", "docker.io/library/busybox:latest", "busybox:1.36", "busybox",
				"docker.io/busybox:1.36", "index.docker.io/library/busybox:1", "busybox:1.36@" + digest},
			refused: []string{"docker.io/library/busybox:1.37/../../evil", "evil/busybox:1.37", "docker.io/evil/busybox:1.37",
				"evil.io/library/busybox:1.37", "docker.io/library/busyboxx:1", "docker.io/library/busybox:1 ", "BusyBox:1"},
		},
		"a short pattern is written in full too": {
			patterns: []string{"busybox:*"},
			allowed:  []string{"docker.io/library/busybox:1.37", "busybox:1.36"},
			refused:  []string{"evil.io/busybox:1.36", "library/busyboxes:1"},
		},
		"an exact image, its default tag": {
			patterns: []string{"busybox"},
			allowed:  []string{"busybox", "busybox:latest", "docker.io/library/busybox:latest"},
			refused:  []string{"busybox:1.37", "busybox@" + digest},
		},
		"an exact image": {
			patterns: []string{"busybox:1.37"},
			allowed:  []string{"busybox:1.37", "docker.io/library/busybox:1.37"},
			refused:  []string{"busybox:1.36", "busybox:1.37x"},
		},
		"a pinned digest": {
			patterns: []string{"registry.example.com/debug/tools@" + digest},
			allowed:  []string{"registry.example.com/debug/tools@" + digest},
			refused:  []string{"registry.example.com/debug/tools:latest", "registry.example.com/debug/tools@" + otherDigest},
		},
		"a registry with a port is not a repository": {
			patterns: []string{"localhost:5000/*"},
			allowed:  []string{"localhost:5000/tools:1", "localhost:5000/tools"},
			refused:  []string{"localhost/tools:1", "docker.io/library/localhost:5000"},
		},
		"a regexp must match the whole image, in full": {
			patterns: []string{`re:docker\.io/library/busybox:1\.3[0-9]`},
			allowed:  []string{"busybox:1.37", "docker.io/library/busybox:1.30"},
			refused:  []string{"busybox:1.37-evil", "evil/busybox:1.37", "busybox:1.4", "docker.io/library/busybox:1.37@" + digest},
		},
		"a regexp written short matches nothing": {
			patterns: []string{`re:busybox:1\.37`},
			refused:  []string{"busybox:1.37"},
		},
		"any pattern may allow": {
			patterns: []string{"a:*", `re:docker\.io/library/b:[0-9]+`},
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

func TestNormalizeImage(t *testing.T) {
	tests := map[string]string{
		"busybox":                             "docker.io/library/busybox:latest",
		"busybox:1.36":                        "docker.io/library/busybox:1.36",
		"docker.io/busybox":                   "docker.io/library/busybox:latest",
		"index.docker.io/library/busybox:1":   "docker.io/library/busybox:1",
		"foo/bar":                             "docker.io/foo/bar:latest",
		"busybox@" + digest:                   "docker.io/library/busybox@" + digest,
		"busybox:1.36@" + digest:              "docker.io/library/busybox:1.36@" + digest,
		"localhost/tools":                     "localhost/tools:latest",
		"localhost:5000/tools":                "localhost:5000/tools:latest",
		"registry.example.com/a/b/c:v1":       "registry.example.com/a/b/c:v1",
		"Registry.Example.com/a:1":            "Registry.Example.com/a:1",
		"[::1]:5000/tools:1":                  "[::1]:5000/tools:1",
		"quay.io/prometheus/busybox:glibc":    "quay.io/prometheus/busybox:glibc",
		"registry.example.com:443/debug/tool": "registry.example.com:443/debug/tool:latest",
	}
	for in, want := range tests {
		if got, ok := NormalizeImage(in); !ok || got != want {
			t.Errorf("NormalizeImage(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, bad := range []string{"", "BusyBox", "busybox:", "busybox@sha256:abc", "a//b", "busybox:1 ", " busybox", "busybox:1.36/../x", "-a/b", "a:b:c"} {
		if got, ok := NormalizeImage(bad); ok {
			t.Errorf("NormalizeImage(%q) = %q, want refused", bad, got)
		}
	}
}

// FuzzNormalizeImage: the full form of a reference is a reference whose
// full form is itself, so comparing full forms is comparing images.
func FuzzNormalizeImage(f *testing.F) {
	for _, s := range []string{"busybox", "a/b:c", "localhost:5000/x@" + digest, "index.docker.io/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, image string) {
		full, ok := NormalizeImage(image)
		if !ok {
			return
		}
		again, ok := NormalizeImage(full)
		if !ok || again != full {
			t.Fatalf("NormalizeImage(%q) = %q, whose full form is %q, %v", image, full, again, ok)
		}
	})
}

// A reference of 4,096 bytes is one the runtime could be given; one byte
// more is refused.
func TestNormalizeImageTakesUpTo4096Bytes(t *testing.T) {
	image := func(n int) string {
		return "registry.example.com/" + strings.Repeat("a/", (n-22)/2) + strings.Repeat("b", 1+(n-22)%2)
	}
	if img := image(4096); len(img) != 4096 {
		t.Fatalf("built %d bytes", len(img))
	}
	if got, ok := NormalizeImage(image(4096)); !ok || got != image(4096)+":latest" {
		t.Errorf("a reference of 4,096 bytes was refused")
	}
	if _, ok := NormalizeImage(image(4097)); ok {
		t.Errorf("a reference of 4,097 bytes was taken")
	}
}
