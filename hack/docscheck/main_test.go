package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// site writes pages (path → text) under a temporary root.
func site(t *testing.T, pages map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for path, text := range pages {
		full := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestCheck(t *testing.T) {
	good := map[string]string{
		"README.md":                  "# Deckhand\n\n[install](docs/operations/install.md#helm), [guide](docs/guides/podset.md)\n",
		"docs/operations/install.md": "# Install\n\n## Helm\n\nBack to [the front page](../../README.md#deckhand).\n",
		"docs/guides/podset.md":      "# PodSet\n\n## Session affinity\n\nThe Service keeps sessionAffinity; [install](../operations/install.md).\n",
		"docs/dev-log/runs.md":       "# Runs\n\nIn session 12 (issue 24) the seed's figures moved.\n",
	}
	tests := map[string]struct {
		edit map[string]string
		want []string
	}{
		"a tree with good links and no internal words": {},
		"a link to a page that does not exist": {
			edit: map[string]string{"docs/guides/podset.md": "# PodSet\n\nSee [gone](gone.md).\n"},
			want: []string{"docs/guides/podset.md:3: link to gone.md: no such file"},
		},
		"a link to a heading that does not exist": {
			edit: map[string]string{"README.md": "# Deckhand\n\n[install](docs/operations/install.md#kustomize)\n"},
			want: []string{"README.md:3: link to docs/operations/install.md#kustomize: docs/operations/install.md has no heading #kustomize"},
		},
		"a user page that speaks of the seed": {
			edit: map[string]string{"docs/guides/podset.md": "# PodSet\n\nAs in the seed, three pods.\n"},
			want: []string{`docs/guides/podset.md:3: a user page says "seed"`},
		},
		"a sample that names an issue": {
			edit: map[string]string{"config/samples/x.yaml": "# Added for issue 12.\nkind: PodSet\n"},
			want: []string{`config/samples/x.yaml:1: a user page says "issue 12"`},
		},
		"a link in fenced code is not a link": {
			edit: map[string]string{"docs/guides/podset.md": "# PodSet\n\n```sh\necho [x](nowhere.md)\n```\n"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			pages := map[string]string{}
			for k, v := range good {
				pages[k] = v
			}
			for k, v := range tt.edit {
				pages[k] = v
			}
			got, err := check(site(t, pages))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("problems %q, want %d: %q", got, len(tt.want), tt.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tt.want[i]) {
					t.Errorf("problem %q, want it to start %q", got[i], tt.want[i])
				}
			}
		})
	}
}

// The project's own pages pass: make verify runs this check.
func TestTheProjectsPagesPass(t *testing.T) {
	problems, err := check(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}
