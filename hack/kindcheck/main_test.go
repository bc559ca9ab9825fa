package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/deckhand-dev/deckhand/internal/manager"
)

// tree copies what check reads of the repository into a temporary root,
// with edit applied to the file at path (relative to the root), if any.
func tree(t *testing.T, path string, edit func(string) string) string {
	t.Helper()
	root := t.TempDir()
	var files []string
	for _, pattern := range []string{"PROJECT", "README.md", "docs/guides/*.md", "config/samples/*", "config/rbac/*"} {
		m, err := filepath.Glob(filepath.Join("..", "..", pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	for _, f := range files {
		rel, _ := filepath.Rel(filepath.Join("..", ".."), f)
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if rel == path {
			data = []byte(edit(string(data)))
		}
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, rel), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// Each check fails, naming the kind and what it misses, on an input broken
// in that one place, and the tree as it is passes.
func TestCheckFailsOnEachBrokenInput(t *testing.T) {
	crds, err := readCRDs(filepath.Join("..", "..", "config", "crd", "bases"))
	if err != nil {
		t.Fatal(err)
	}
	registry, converted := manager.Registry(), manager.ConvertedCRDs()
	if err := check(tree(t, "", nil), crds, registry, converted); err != nil {
		t.Fatalf("the tree as it is: %v", err)
	}
	without := func(drop func(*manager.Controller)) []manager.Controller {
		r := manager.Registry()
		for i := range r {
			if r[i].Name == "podset" {
				drop(&r[i])
			}
		}
		return r
	}
	dropLine := func(line string) func(string) string {
		return func(s string) string { return strings.Replace(s, line, "", 1) }
	}
	tests := map[string]struct {
		root      string
		registry  []manager.Controller
		converted []string
		want      string
	}{
		"an entry without Setup": {registry: without(func(c *manager.Controller) { c.Setup = nil }),
			want: "PodSet: the entry podset in internal/manager/controllers.go has no Setup"},
		"no entry": {registry: slices.DeleteFunc(manager.Registry(), func(c manager.Controller) bool { return c.Name == "podset" }),
			want: "PodSet: no controller in internal/manager/controllers.go registers apps.deckhand.dev/v1beta1, Kind=PodSet"},
		"an editor role the kustomization does not list": {root: tree(t, "config/rbac/kustomization.yaml", dropLine("- podset_editor_role.yaml\n")),
			want: "PodSet: config/rbac/kustomization.yaml does not list podset_editor_role.yaml"},
		"a viewer role the kustomization does not list": {root: tree(t, "config/rbac/kustomization.yaml", dropLine("- podbugger_viewer_role.yaml\n")),
			want: "PodBugger: config/rbac/kustomization.yaml does not list podbugger_viewer_role.yaml"},
		"a CRD in two versions not converted": {converted: slices.DeleteFunc(slices.Clone(converted), func(s string) bool { return s == "podsets.apps.deckhand.dev" }),
			want: "PodSet: served in 2 versions, but manager.ConvertedCRDs does not name podsets.apps.deckhand.dev"},
		"a converted CRD in one version": {converted: append(slices.Clone(converted), "modelboxes.model.deckhand.dev"),
			want: "manager.ConvertedCRDs names modelboxes.model.deckhand.dev, which config/crd/bases does not serve in more than one version"},
		"a sample the kustomization does not list": {root: tree(t, "config/samples/kustomization.yaml", dropLine("- model_v1_modelbox.yaml\n")),
			want: "ModelBox: config/samples/kustomization.yaml does not list model_v1_modelbox.yaml"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			root, reg, conv := tc.root, tc.registry, tc.converted
			if root == "" {
				root = tree(t, "", nil)
			}
			if reg == nil {
				reg = registry
			}
			if conv == nil {
				conv = converted
			}
			err := check(root, crds, reg, conv)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("check = %v, want an error with %q", err, tc.want)
			}
		})
	}
}
