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
// without the files named in leave (relative to the root).
func tree(t *testing.T, leave ...string) string {
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
		if slices.Contains(leave, rel) {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
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
	if err := check(tree(t), crds, registry, converted); err != nil {
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
	tests := map[string]struct {
		root      string
		registry  []manager.Controller
		converted []string
		want      string
	}{
		"no sample": {root: tree(t, "config/samples/model_v1_modelbox.yaml"),
			want: "ModelBox: no sample config/samples/model_v1_modelbox.yaml"},
		"no viewer role": {root: tree(t, "config/rbac/podbugger_viewer_role.yaml"),
			want: "PodBugger: no viewer ClusterRole config/rbac/podbugger_viewer_role.yaml"},
		"an entry without Setup": {registry: without(func(c *manager.Controller) { c.Setup = nil }),
			want: "PodSet: the entry podset of the registry (internal/manager) has no Setup"},
		"no entry": {registry: slices.DeleteFunc(manager.Registry(), func(c manager.Controller) bool { return c.Name == "podset" }),
			want: "PodSet: no entry of the registry (internal/manager) registers apps.deckhand.dev/v1beta1, Kind=PodSet"},
		"a CRD in two versions not converted": {converted: slices.DeleteFunc(slices.Clone(converted), func(s string) bool { return s == "podsets.apps.deckhand.dev" }),
			want: "PodSet: served in 2 versions, but manager.ConvertedCRDs does not name podsets.apps.deckhand.dev"},
		"a converted CRD in one version": {converted: append(slices.Clone(converted), "modelboxes.model.deckhand.dev"),
			want: "manager.ConvertedCRDs names modelboxes.model.deckhand.dev, which config/crd/bases does not serve in more than one version"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			root, reg, conv := tc.root, tc.registry, tc.converted
			if root == "" {
				root = tree(t)
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

// The kustomizations kindcheck writes list every sample and every kind's
// roles found beside them, a new kind's too, and the manager's own RBAC.
func TestKustomizationsListWhatIsThere(t *testing.T) {
	root := tree(t)
	for _, f := range []string{"config/samples/widget_v1_gadget.yaml", "config/rbac/gadget_editor_role.yaml", "config/rbac/gadget_viewer_role.yaml"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte("kind: Gadget\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeSamplesKustomization(filepath.Join(root, "config", "samples")); err != nil {
		t.Fatal(err)
	}
	if err := writeRBACKustomization(filepath.Join(root, "config", "rbac")); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string][]string{
		"config/samples/kustomization.yaml": {"widget_v1_gadget.yaml", "model_v1_modelbox.yaml", "debug_v1beta1_podincident.yaml"},
		"config/rbac/kustomization.yaml":    {"gadget_editor_role.yaml", "gadget_viewer_role.yaml", "podset_editor_role.yaml", "role.yaml", "role_binding.yaml"},
	} {
		data, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !slices.Contains(strings.Fields(string(data)), w) {
				t.Errorf("%s does not list %s:\n%s", file, w, data)
			}
		}
		if slices.Contains(strings.Fields(string(data)), "kustomization.yaml") {
			t.Errorf("%s lists itself", file)
		}
	}
}
