// Command helmsync copies what controller-gen generates into the Helm chart,
// so that the chart and config/default install the same CRDs, RBAC rules and
// webhooks: CRDs into charts/deckhand/crds, the manager's ClusterRole and
// Role rules and the webhook lists into charts/deckhand/files. It does the
// same for what config/ holds by hand and the chart must repeat: the kinds'
// editor and viewer roles, the alert rules (also wrapped into the
// PrometheusRule of config/prometheus) and the Grafana dashboard. `make
// manifests` runs it; `make verify` fails when its output is stale.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

const chart = "charts/deckhand"

// NamespacePlaceholder stands for the release namespace in generated files;
// the templates replace it.
const NamespacePlaceholder = "DECKHAND_NAMESPACE"

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "helmsync: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	if err := syncCRDs(); err != nil {
		return err
	}
	if err := syncRBAC(); err != nil {
		return err
	}
	if err := syncKindRoles(); err != nil {
		return err
	}
	if err := syncAlerts(); err != nil {
		return err
	}
	if err := copyFile("config/grafana/deckhand-dashboard.json", filepath.Join(chart, "files", "grafana-dashboard.json")); err != nil {
		return err
	}
	if err := syncArgoCD(); err != nil {
		return err
	}
	return syncWebhooks()
}

// hasStatus reports whether a CRD serves a status subresource in a version:
// only such kinds have the conditions health.lua reads.
func hasStatus(crd *unstructured.Unstructured) bool {
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		if m, ok := v.(map[string]any); ok {
			if _, found, _ := unstructured.NestedMap(m, "subresources", "status"); found {
				return true
			}
		}
	}
	return false
}

// syncArgoCD writes config/argocd/health.lua, the Argo CD health check every
// kind shares, under the argocd-cm key of each kind of config/crd/bases:
// as a patch of Argo CD's argocd-cm (config/argocd/argocd-cm.yaml, which
// the kustomize component applies) and as the chart's data
// (files/argocd-health.yaml).
func syncArgoCD() error {
	script, err := os.ReadFile("config/argocd/health.lua")
	if err != nil {
		return err
	}
	crds, err := filepath.Glob("config/crd/bases/*.yaml")
	if err != nil {
		return err
	}
	data := map[string]string{}
	for _, f := range crds {
		objs, err := readAll(f)
		if err != nil {
			return err
		}
		for _, o := range objs {
			group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
			if !hasStatus(o) {
				continue // a record (PodIncident) has no health to judge
			}
			data["resource.customizations.health."+group+"_"+kind] = string(script)
		}
	}
	type meta struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	}
	cm := struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   meta              `json:"metadata"`
		Data       map[string]string `json:"data"`
	}{"v1", "ConfigMap", meta{"argocd-cm", "argocd"}, data}
	if err := writeYAMLFrom("config/argocd/argocd-cm.yaml", cm, "config/argocd/health.lua"); err != nil {
		return err
	}
	return writeYAMLFrom(filepath.Join(chart, "files", "argocd-health.yaml"), data, "config/argocd/health.lua")
}

// syncKindRoles writes the editor and viewer ClusterRoles of
// config/rbac/*_editor_role.yaml and *_viewer_role.yaml as a list of
// {name, labels, rules}; the chart's template prefixes the names and adds
// its labels to the aggregation labels kept here.
func syncKindRoles() error {
	var files []string
	for _, pattern := range []string{"config/rbac/*_editor_role.yaml", "config/rbac/*_viewer_role.yaml"} {
		f, err := filepath.Glob(pattern)
		if err != nil {
			return err
		}
		files = append(files, f...)
	}
	slices.Sort(files)
	var roles []map[string]any
	for _, f := range files {
		objs, err := readAll(f)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if o.GetKind() != "ClusterRole" {
				return fmt.Errorf("%s: unexpected %s", f, o.GetKind())
			}
			labels := map[string]any{}
			for k, v := range o.GetLabels() {
				if strings.HasPrefix(k, "rbac.authorization.k8s.io/") {
					labels[k] = v
				}
			}
			rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
			roles = append(roles, map[string]any{keyName: o.GetName(), "labels": labels, "rules": rules})
		}
	}
	return writeYAMLFrom(filepath.Join(chart, "files", "kind-roles.yaml"), roles, "config/rbac/*_editor_role.yaml and *_viewer_role.yaml")
}

// syncAlerts wraps the rule groups of config/prometheus/alerts.yaml (the file
// promtool tests) into the PrometheusRule that config/prometheus installs,
// and writes them for the chart's.
func syncAlerts() error {
	data, err := os.ReadFile("config/prometheus/alerts.yaml")
	if err != nil {
		return err
	}
	var file struct {
		Groups []any `json:"groups"`
	}
	if err := sigsyaml.UnmarshalStrict(data, &file); err != nil {
		return fmt.Errorf("config/prometheus/alerts.yaml: %w", err)
	}
	if err := writeYAMLFrom(filepath.Join(chart, "files", "prometheus-rules.yaml"), file.Groups, "config/prometheus/alerts.yaml"); err != nil {
		return err
	}
	rule := map[string]any{
		"apiVersion": "monitoring.coreos.com/v1",
		"kind":       "PrometheusRule",
		"metadata": map[string]any{
			"name":      "deckhand-alerts",
			"namespace": "deckhand-system",
			"labels":    map[string]any{"app.kubernetes.io/name": "deckhand"},
		},
		"spec": map[string]any{"groups": file.Groups},
	}
	return writeYAMLFrom("config/prometheus/prometheus_rule.yaml", rule, "config/prometheus/alerts.yaml")
}

func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o644)
}

func syncCRDs() error {
	dst := filepath.Join(chart, "crds")
	old, _ := filepath.Glob(filepath.Join(dst, "*.yaml"))
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	crds, _ := filepath.Glob("config/crd/bases/*.yaml")
	for _, f := range crds {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if data, err = withConversion(data); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(f)), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ChartNamespace is the namespace the chart's CRDs expect the conversion
// webhook's Service in: Helm never templates crds/, so it cannot be the
// release namespace (README.md, "Helm").
const ChartNamespace = "deckhand-system"

// withConversion returns a CRD served in more than one version with its
// conversion webhook set, as config/crd's patches set it; other CRDs are
// returned unchanged.
func withConversion(data []byte) ([]byte, error) {
	crd := map[string]any{}
	if err := sigsyaml.Unmarshal(data, &crd); err != nil {
		return nil, err
	}
	versions, _, _ := unstructured.NestedSlice(crd, "spec", "versions")
	if len(versions) < 2 {
		return data, nil
	}
	conversion := map[string]any{
		"strategy": "Webhook",
		"webhook": map[string]any{
			"clientConfig":             map[string]any{},
			"conversionReviewVersions": []any{"v1"},
		},
	}
	service := map[string]any{"namespace": ChartNamespace, "path": "/convert"}
	if err := unstructured.SetNestedField(service, "deckhand-webhook-service", "name"); err != nil {
		return nil, err
	}
	if err := unstructured.SetNestedMap(conversion, service, "webhook", "clientConfig", "service"); err != nil {
		return nil, err
	}
	if err := unstructured.SetNestedMap(crd, conversion, "spec", "conversion"); err != nil {
		return nil, err
	}
	out, err := sigsyaml.Marshal(crd)
	if err != nil {
		return nil, err
	}
	return append([]byte("---\n"), out...), nil
}

// syncRBAC writes the rules of the generated ClusterRole and (namespaced)
// Role, split by certificate mode and, for a namespaced install, by scope.
// The Role (the certificate Secret) and the ClusterRole's rules on webhook
// configurations and CRDs (CA injection) are the self-signed mode's alone:
// with cert-manager, its CA injector fills caBundle and it writes the
// Secret, so the manager needs none of them. The ClusterRole's other rules
// are split into those on cluster-scoped resources (granted cluster-wide)
// and the others (granted by a Role in each watched namespace).
func syncRBAC() error {
	objs, err := readAll("config/rbac/role.yaml")
	if err != nil {
		return err
	}
	for _, o := range objs {
		rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
		switch o.GetKind() {
		case "Role":
			if err := writeYAMLFrom(filepath.Join(chart, "files", "role-rules.yaml"), rules,
				"config/rbac/role.yaml (the self-signed mode's Role)"); err != nil {
				return err
			}
			continue
		case kindClusterRole:
		default:
			return fmt.Errorf("unexpected %s in role.yaml", o.GetKind())
		}
		common, selfSigned := splitCertificateRules(rules)
		if err := writeYAMLFrom(filepath.Join(chart, "files", "cluster-role-rules.yaml"), common,
			"config/rbac/role.yaml (the rules of every certificate mode)"); err != nil {
			return err
		}
		if err := writeYAMLFrom(filepath.Join(chart, "files", "self-signed-cluster-rules.yaml"), selfSigned,
			"config/rbac/role.yaml (the self-signed mode's CA injection)"); err != nil {
			return err
		}
		if err := writeYAMLFrom(filepath.Join(CertManagerOverlay, "manager_role.yaml"),
			rbacObject(kindClusterRole, "deckhand-manager-role", "", common), "config/rbac/role.yaml (without the self-signed mode's rules)"); err != nil {
			return err
		}
		cluster, namespaced, err := splitRules(rules)
		if err != nil {
			return err
		}
		clusterCommon, _ := splitCertificateRules(cluster)
		if err := writeYAML(filepath.Join(chart, "files", "cluster-scoped-rules.yaml"), clusterCommon); err != nil {
			return err
		}
		if err := writeYAML(filepath.Join(chart, "files", "namespaced-rules.yaml"), namespaced); err != nil {
			return err
		}
		if err := writeNamespacedOverlay(cluster, namespaced); err != nil {
			return err
		}
	}
	return nil
}

// CertManagerOverlay is config/overlays/cert-manager, whose ClusterRole
// (the rules of every mode, without CA injection) syncRBAC writes.
const CertManagerOverlay = "config/overlays/cert-manager"

// certificateResources are what only the self-signed mode's CA injection
// touches: the manager's webhook configuration and the CRDs it converts.
var certificateResources = map[string]bool{
	"validatingwebhookconfigurations": true,
	"mutatingwebhookconfigurations":   true,
	"customresourcedefinitions":       true,
}

// splitCertificateRules splits rules into those every mode grants and those
// on certificateResources; a rule naming both is split in two.
func splitCertificateRules(rules []any) (common, selfSigned []any) {
	for _, r := range rules {
		rule := r.(map[string]any)
		resources, _, _ := unstructured.NestedStringSlice(rule, "resources")
		var c, s []any
		for _, res := range resources {
			if certificateResources[res] {
				s = append(s, res)
			} else {
				c = append(c, res)
			}
		}
		for _, part := range []struct {
			resources []any
			into      *[]any
		}{{c, &common}, {s, &selfSigned}} {
			if len(part.resources) == 0 {
				continue
			}
			copied := runtime.DeepCopyJSON(rule)
			copied["resources"] = part.resources
			*part.into = append(*part.into, copied)
		}
	}
	return common, selfSigned
}

// clusterScoped are the cluster-scoped resources the manager's rules name. A
// Role cannot grant them; a namespaced install grants them (and only them)
// cluster-wide. A new cluster-scoped resource in a marker must be added here,
// or a namespaced install would grant it nowhere (the namespaced e2e test
// shows it).
var clusterScoped = map[string]bool{
	"namespaces":                      true,
	"nodes":                           true,
	"persistentvolumes":               true,
	"customresourcedefinitions":       true,
	"validatingwebhookconfigurations": true,
	"mutatingwebhookconfigurations":   true,
	"tokenreviews":                    true,
	"subjectaccessreviews":            true,
	"clusterjobwatchers":              true,
	"clusterjobwatchers/status":       true,
}

// splitRules splits rules into those on cluster-scoped resources and those
// on namespaced ones; a rule naming both kinds is split in two.
func splitRules(rules []any) (cluster, namespaced []any, err error) {
	for _, r := range rules {
		rule, ok := r.(map[string]any)
		if !ok {
			return nil, nil, fmt.Errorf("unexpected rule %v", r)
		}
		resources, _, _ := unstructured.NestedStringSlice(rule, "resources")
		var c, n []any
		for _, res := range resources {
			if clusterScoped[res] {
				c = append(c, res)
			} else {
				n = append(n, res)
			}
		}
		for _, part := range []struct {
			resources []any
			into      *[]any
		}{{c, &cluster}, {n, &namespaced}} {
			if len(part.resources) == 0 {
				continue
			}
			copied := runtime.DeepCopyJSON(rule)
			copied["resources"] = part.resources
			*part.into = append(*part.into, copied)
		}
	}
	return cluster, namespaced, nil
}

// Overlay is config/overlays/namespaced: a namespaced install for
// OverlayNamespace, whose generated roles writeNamespacedOverlay writes.
const (
	Overlay          = "config/overlays/namespaced"
	OverlayNamespace = "deckhand-tenant"
)

// writeNamespacedOverlay writes the overlay's ClusterRole (the cluster-scoped
// rules) and the Role of its watched namespace (the namespaced ones).
func writeNamespacedOverlay(cluster, namespaced []any) error {
	if err := writeYAMLFrom(filepath.Join(Overlay, "manager_cluster_role.yaml"),
		rbacObject(kindClusterRole, "deckhand-manager-role", "", cluster), "config/rbac/role.yaml"); err != nil {
		return err
	}
	return writeYAMLFrom(filepath.Join(Overlay, "manager_watch_role.yaml"),
		rbacObject("Role", "deckhand-manager-watch-role", OverlayNamespace, namespaced), "config/rbac/role.yaml")
}

// rbacObject is a ClusterRole or Role with rules.
func rbacObject(kind, name, namespace string, rules []any) map[string]any {
	meta := map[string]any{keyName: name}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	return map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta, "rules": rules}
}

const (
	kindClusterRole = "ClusterRole"
	keyName         = "name"
)

// syncWebhooks writes each generated configuration's webhooks list, with the
// Service pointed at the chart's webhook Service in the release namespace.
func syncWebhooks() error {
	files := map[string]string{
		"ValidatingWebhookConfiguration": "validating-webhooks.yaml",
		"MutatingWebhookConfiguration":   "mutating-webhooks.yaml",
	}
	for _, name := range files {
		_ = os.Remove(filepath.Join(chart, "files", name))
	}
	objs, err := readAll("config/webhook/manifests.yaml")
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	for _, o := range objs {
		hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
		for _, h := range hooks {
			m := h.(map[string]any)
			_ = unstructured.SetNestedField(m, "deckhand-webhook-service", "clientConfig", "service", "name")
			_ = unstructured.SetNestedField(m, NamespacePlaceholder, "clientConfig", "service", "namespace")
		}
		if err := writeYAML(filepath.Join(chart, "files", files[o.GetKind()]), hooks); err != nil {
			return err
		}
	}
	return nil
}

func readAll(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		o := &unstructured.Unstructured{}
		if err := dec.Decode(&o.Object); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(o.Object) > 0 {
			out = append(out, o)
		}
	}
}

func writeYAML(path string, v any) error {
	return writeYAMLFrom(path, v, "controller-gen's output")
}

// writeYAMLFrom writes v to path with a header that names its source.
func writeYAMLFrom(path string, v any, source string) error {
	data, err := sigsyaml.Marshal(v)
	if err != nil {
		return err
	}
	header := "# Generated by hack/helmsync from " + source + ". DO NOT EDIT.\n"
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(header+strings.TrimSpace(string(data))+"\n"), 0o644)
}
