// Package installs checks what the two installs (config/ through kustomize,
// the Helm chart) grant and ship, rendered as a user renders them, without
// a cluster: the manager's rights in each certificate mode against
// testdata/rbac, and the chart's NetworkPolicy. Its envtest test upgrades a
// Helm release of the previous release (helm_test.go).
package installs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/internal/textdiff"
)

// root is the repository's root.
func root(t testing.TB) string {
	t.Helper()
	r, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// helmBinary is the pinned helm of bin/ (make test-unit builds it), or
// DECKHAND_HELM.
func helmBinary(t testing.TB) string {
	t.Helper()
	if h := os.Getenv("DECKHAND_HELM"); h != "" {
		return h
	}
	matches, _ := filepath.Glob(filepath.Join(root(t), "bin", "helm-*"))
	if len(matches) == 0 {
		t.Fatal("no helm in bin/: run through 'make test-unit', which builds it")
	}
	return matches[len(matches)-1]
}

func run(t testing.TB, name string, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Dir = root(t)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v: %s", filepath.Base(name), strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// helmTemplate renders the chart as `helm template` does, into namespace
// deckhand-system.
func helmTemplate(t testing.TB, args ...string) []*unstructured.Unstructured {
	t.Helper()
	return decode(t, run(t, helmBinary(t), append([]string{"template", "deckhand", "charts/deckhand",
		"--namespace", "deckhand-system", "--kube-version", "v1.37.1"}, args...)...))
}

// kustomize renders a directory of config/ as `kubectl apply -k` does.
func kustomize(t testing.TB, dir string) []*unstructured.Unstructured {
	t.Helper()
	return decode(t, run(t, filepath.Join(root(t), "bin", "k8s", "kubectl"), "kustomize", dir))
}

func decode(t testing.TB, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		o := &unstructured.Unstructured{}
		if err := dec.Decode(&o.Object); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("decoding manifests: %v", err)
		}
		if len(o.Object) > 0 {
			out = append(out, o)
		}
	}
}

// find returns the object of kind and name, or nil.
func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// grants lists what the manager's ServiceAccount is granted by the roles
// bound to it, one line per scope, group, resource and name, with its
// verbs: "cluster-wide" for a ClusterRoleBinding, the namespace for a
// RoleBinding.
func grants(t testing.TB, objs []*unstructured.Unstructured) []string {
	t.Helper()
	verbs := map[string][]string{}
	for _, b := range objs {
		role := boundRole(t, objs, b)
		if role == nil {
			continue
		}
		scope := "cluster-wide"
		if b.GetKind() == "RoleBinding" {
			scope = "namespace " + b.GetNamespace()
		}
		rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
		for _, r := range rules {
			addRule(verbs, scope, r.(map[string]any))
		}
	}
	lines := make([]string, 0, len(verbs))
	for k, vs := range verbs {
		slices.Sort(vs)
		lines = append(lines, k+"  ["+strings.Join(slices.Compact(vs), " ")+"]")
	}
	slices.Sort(lines)
	return lines
}

// boundRole is the role b binds to the manager's ServiceAccount; nil when b
// is no binding of it.
func boundRole(t testing.TB, objs []*unstructured.Unstructured, b *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	if b.GetKind() != "ClusterRoleBinding" && b.GetKind() != "RoleBinding" {
		return nil
	}
	subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
	if !slices.ContainsFunc(subjects, func(s any) bool {
		m := s.(map[string]any)
		return m["kind"] == "ServiceAccount" && m["name"] == "deckhand-controller-manager"
	}) {
		return nil
	}
	refKind, _, _ := unstructured.NestedString(b.Object, "roleRef", "kind")
	refName, _, _ := unstructured.NestedString(b.Object, "roleRef", "name")
	for _, o := range objs {
		if o.GetKind() == refKind && o.GetName() == refName && (refKind == "ClusterRole" || o.GetNamespace() == b.GetNamespace()) {
			return o
		}
	}
	t.Fatalf("%s %s/%s binds %s %s, which the install does not have", b.GetKind(), b.GetNamespace(), b.GetName(), refKind, refName)
	return nil
}

// addRule adds a rule's verbs to verbs, keyed by scope, resource.group and
// name ("*" for any), or by scope and non-resource URL.
func addRule(verbs map[string][]string, scope string, rule map[string]any) {
	groups, _, _ := unstructured.NestedStringSlice(rule, "apiGroups")
	resources, _, _ := unstructured.NestedStringSlice(rule, "resources")
	names, _, _ := unstructured.NestedStringSlice(rule, "resourceNames")
	vs, _, _ := unstructured.NestedStringSlice(rule, "verbs")
	urls, _, _ := unstructured.NestedStringSlice(rule, "nonResourceURLs")
	for _, u := range urls {
		key := fmt.Sprintf("%s  url %s", scope, u)
		verbs[key] = append(verbs[key], vs...)
	}
	if len(names) == 0 {
		names = []string{"*"}
	}
	for _, g := range groups {
		for _, res := range resources {
			if g != "" {
				res += "." + g
			}
			for _, n := range names {
				key := fmt.Sprintf("%s  %s  %s", scope, res, n)
				verbs[key] = append(verbs[key], vs...)
			}
		}
	}
}

// The installs of each certificate mode, as a user renders them.
var modes = []struct {
	name, mode string
	render     func(t testing.TB) []*unstructured.Unstructured
}{
	{"install-self-signed", "self-signed", func(t testing.TB) []*unstructured.Unstructured { return kustomize(t, "config/default") }},
	{"install-cert-manager", "cert-manager", func(t testing.TB) []*unstructured.Unstructured { return kustomize(t, "config/overlays/cert-manager") }},
	{"install-namespaced-self-signed", "self-signed", func(t testing.TB) []*unstructured.Unstructured { return kustomize(t, "config/overlays/namespaced") }},
	{"chart-self-signed", "self-signed", func(t testing.TB) []*unstructured.Unstructured { return helmTemplate(t) }},
	{"chart-cert-manager", "cert-manager", func(t testing.TB) []*unstructured.Unstructured {
		return helmTemplate(t, "--set", "certificates.mode=cert-manager")
	}},
	{"chart-namespaced-self-signed", "self-signed", func(t testing.TB) []*unstructured.Unstructured {
		return helmTemplate(t, "--set", "watchNamespaces={deckhand-tenant}")
	}},
	{"chart-namespaced-cert-manager", "cert-manager", func(t testing.TB) []*unstructured.Unstructured {
		return helmTemplate(t, "--set", "watchNamespaces={deckhand-tenant}", "--set", "certificates.mode=cert-manager")
	}},
}

// What the manager may do, in each install and certificate mode, is
// exactly what testdata/rbac/<install>.golden says (regenerate with
// UPDATE_GOLDEN=1 after an RBAC change, and review the difference). Beside
// the golden files, what no mode may grant: Secrets create, or a Secret
// right without a name (the manager could mint ServiceAccount tokens); and
// with cert-manager no Secret, webhook configuration or CRD right at all
// (cert-manager writes the Secret, its CA injector fills caBundle). The
// chart and config/ grant the same in each mode.
func TestEachModeGrantsWhatItsGoldenFileSays(t *testing.T) {
	got := map[string][]string{}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			lines := grants(t, m.render(t))
			got[m.name] = lines
			golden := filepath.Join("testdata", "rbac", m.name+".golden")
			text := "# What the manager's ServiceAccount is granted: " + m.name + " (certificate mode " + m.mode + ").\n" +
				"# scope  resource.group  name (* for any)  [verbs]\n" + strings.Join(lines, "\n") + "\n"
			if os.Getenv("UPDATE_GOLDEN") != "" {
				if err := os.WriteFile(golden, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if text != string(want) {
				t.Errorf("%s grants other rights than %s: review, then run with UPDATE_GOLDEN=1\n%s", m.name, golden, strings.Join(textdiff.Lines(string(want), text), "\n"))
			}
			for _, l := range lines {
				if strings.Contains(l, "  secrets  ") && (strings.Contains(l, "  secrets  *  ") || strings.Contains(l, "create")) {
					t.Errorf("%s grants Secrets beyond the certificate Secret's get and update by name: %s", m.name, l)
				}
				if m.mode == "cert-manager" {
					for _, res := range []string{"  secrets  ", "validatingwebhookconfigurations", "mutatingwebhookconfigurations", "customresourcedefinitions"} {
						if strings.Contains(l, res) {
							t.Errorf("%s (cert-manager) grants a right only the self-signed mode needs: %s", m.name, l)
						}
					}
				}
			}
		})
	}
	for install, chart := range map[string]string{
		"install-self-signed":            "chart-self-signed",
		"install-cert-manager":           "chart-cert-manager",
		"install-namespaced-self-signed": "chart-namespaced-self-signed",
	} {
		if got[install] != nil && !slices.Equal(got[install], got[chart]) {
			t.Errorf("%s and %s grant different rights:\n%s", install, chart, strings.Join(textdiff.Lines(strings.Join(got[install], "\n"), strings.Join(got[chart], "\n")), "\n"))
		}
	}
}

// Both installs ship the certificate Secret, empty and untyped, in
// self-signed mode only: the manager fills it and may not create it, and
// applying an install again must not empty it. With cert-manager neither
// ships it (cert-manager writes its own, of its own type).
func TestTheCertificateSecretIsShippedEmptyInSelfSignedModeOnly(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			secret := find(m.render(t), "Secret", "deckhand-webhook-server-cert")
			if m.mode == "cert-manager" {
				if secret != nil {
					t.Fatalf("%s ships the certificate Secret that cert-manager writes", m.name)
				}
				return
			}
			if secret == nil {
				t.Fatalf("%s does not ship the certificate Secret: the manager cannot create it", m.name)
			}
			for _, field := range []string{"data", "stringData", "type"} {
				if _, ok := secret.Object[field]; ok {
					t.Errorf("%s's Secret has %s: applying the install again would change what the manager wrote", m.name, field)
				}
			}
			if secret.GetNamespace() != "deckhand-system" {
				t.Errorf("%s's Secret is in %q, not the manager's namespace", m.name, secret.GetNamespace())
			}
		})
	}
}
