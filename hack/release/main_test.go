package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// copyTree copies the files check reads into a temporary root, with edit
// applied to one of them.
func copyTree(t *testing.T, path string, edit func(string) string) string {
	t.Helper()
	root := t.TempDir()
	for _, f := range []string{"VERSION", "charts/deckhand/Chart.yaml", "charts/deckhand/values.yaml", "config/manager/kustomization.yaml", "CHANGELOG.md", "README.md"} {
		data, err := os.ReadFile(filepath.Join("..", "..", f))
		if err != nil {
			t.Fatal(err)
		}
		if f == path {
			data = []byte(edit(string(data)))
		}
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestCheck(t *testing.T) {
	v, err := Version(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		path string
		edit func(string) string
		want string
	}{
		"the project as committed": {},
		"a chart version left behind": {
			path: "charts/deckhand/Chart.yaml",
			edit: func(s string) string { return strings.Replace(s, "version: "+v, "version: 0.0.1", 1) },
			want: `charts/deckhand/Chart.yaml version is "0.0.1"`,
		},
		"the chart's image on latest": {
			path: "charts/deckhand/values.yaml",
			edit: func(s string) string { return strings.Replace(s, "tag: v"+v, "tag: latest", 1) },
			want: `charts/deckhand/values.yaml image.tag is "latest"`,
		},
		"the install's image on another tag": {
			path: "config/manager/kustomization.yaml",
			edit: func(s string) string { return strings.Replace(s, "newTag: v"+v, "newTag: v9.9.9", 1) },
			want: `newTag of controller is "v9.9.9"`,
		},
		"no changelog entry": {
			path: "CHANGELOG.md",
			edit: func(s string) string { return strings.ReplaceAll(s, "## "+v, "## next") },
			want: "CHANGELOG.md does not say",
		},
		"not a version": {
			path: "VERSION",
			edit: func(string) string { return "v1" },
			want: "is not a semantic version",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			edit := tt.edit
			if edit == nil {
				edit = func(s string) string { return s }
			}
			err := check(copyTree(t, tt.path, edit))
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("check: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("check: %v, want an error saying %q", err, tt.want)
			}
		})
	}
}
