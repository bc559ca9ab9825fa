//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	"github.com/deckhand-dev/deckhand/test/cluster"
)

// The install (applied by cluster.Start from dist/install.yaml) puts the
// manager in a namespace that enforces the restricted Pod Security level, and
// its pod is admitted there.
func TestInstalledManagerRunsUnderRestrictedPodSecurity(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()

	ns := &corev1.Namespace{}
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Name: cluster.Namespace}, ns)).To(Succeed())
	g.Expect(ns.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "restricted"))

	g.Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: "deckhand-controller-manager"}, d)).To(Succeed())
		g.Expect(d.Status.AvailableReplicas).To(BeEquivalentTo(1))
	}).WithTimeout(2 * time.Minute).Should(Succeed())

	// The namespace really enforces: a pod that is not restricted is refused.
	bad := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: "not-restricted"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	err := c.Client.Create(ctx, bad, client.DryRunAll)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden by Pod Security, got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("restricted"))
}

// The Helm chart installs the same objects as install.yaml, and its
// namespaced part runs in a restricted namespace of its own.
func TestHelmChartInstallsWhatInstallYAMLInstalls(t *testing.T) {
	g := NewWithT(t)
	helm := helmBinary(t)

	out, err := exec.Command(helm, "lint", "--strict", chartDir()).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))

	chart := helmTemplate(t, helm, cluster.Namespace)
	installer, err := os.ReadFile(filepath.Join(repoRoot(), "dist", "install.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	fromChart, fromInstaller := decode(t, chart), decode(t, installer)
	// Helm installs into a namespace it is given (helm install -n, or
	// --create-namespace) and, by convention, does not create it.
	fromInstaller = slices.DeleteFunc(fromInstaller, func(o *unstructured.Unstructured) bool { return o.GetKind() == "Namespace" })
	g.Expect(identities(fromChart)).To(Equal(identities(fromInstaller)))
	for _, kind := range []string{"ClusterRole", "Role", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "CustomResourceDefinition", "NetworkPolicy"} {
		g.Expect(specs(fromChart, kind)).To(Equal(specs(fromInstaller, kind)), kind)
	}
	// The roles aggregate into the same built-in roles.
	g.Expect(aggregation(fromChart)).To(Equal(aggregation(fromInstaller)))

	// The chart in a restricted namespace of its own: its namespaced objects
	// for real (the manager pod must be admitted), its cluster-wide ones
	// (shared with the installed copy) checked by the apiserver in dry run.
	helmNS := c.Namespace(t, map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	var namespaced, clusterWide []*unstructured.Unstructured
	for _, o := range decode(t, helmTemplate(t, helm, helmNS)) {
		if o.GetNamespace() != "" {
			namespaced = append(namespaced, o)
		} else {
			clusterWide = append(clusterWide, o)
		}
	}
	_, err = c.Kubectl("apply", "--server-side", "-f", writeObjects(t, namespaced))
	g.Expect(err).NotTo(HaveOccurred())
	// Replaced, not applied: a manager run out of the cluster by an earlier
	// test (RunManager) pointed the webhooks and the CRDs' conversion at a
	// URL, and an apply would merge the chart's Service reference into that
	// (both set: refused). A replace checks the chart's objects as they are.
	_, err = c.Kubectl("replace", "--dry-run=server", "-f", writeObjects(t, clusterWide))
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(c.Client.Get(context.Background(), client.ObjectKey{Namespace: helmNS, Name: "deckhand-controller-manager"}, d)).To(Succeed())
		g.Expect(d.Status.AvailableReplicas).To(BeEquivalentTo(1))
	}).WithTimeout(2 * time.Minute).Should(Succeed())
}

// What the manager's ServiceAccount may do is exactly what is reviewed in
// testdata/can-i.golden. Regenerate with UPDATE_GOLDEN=1 after an RBAC
// marker change, and review the diff.
func TestManagerPermissionsMatchGolden(t *testing.T) {
	g := NewWithT(t)
	as := "system:serviceaccount:" + cluster.Namespace + ":" + cluster.ServiceAccount
	var got strings.Builder
	for _, ns := range []string{cluster.Namespace, "default"} {
		out, err := c.Kubectl("auth", "can-i", "--list", "--as", as, "-n", ns)
		g.Expect(err).NotTo(HaveOccurred())
		got.WriteString("# namespace " + ns + "\n" + out)
	}
	golden := filepath.Join("testdata", "can-i.golden")
	if os.Getenv("UPDATE_GOLDEN") != "" {
		g.Expect(os.WriteFile(golden, []byte(got.String()), 0o644)).To(Succeed())
	}
	want, err := os.ReadFile(golden)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.String()).To(Equal(string(want)), "RBAC changed: review and run with UPDATE_GOLDEN=1")
}

func helmBinary(t *testing.T) string {
	t.Helper()
	helm := os.Getenv("DECKHAND_HELM")
	if helm == "" {
		matches, _ := filepath.Glob(filepath.Join(repoRoot(), "bin", "helm-*"))
		if len(matches) == 0 {
			t.Fatal("no helm in bin/: run through 'make test-e2e', which builds it")
		}
		helm = matches[len(matches)-1]
	}
	return helm
}

func chartDir() string { return filepath.Join(repoRoot(), "charts", "deckhand") }

func repoRoot() string { return filepath.Join("..", "..") }

func helmTemplate(t *testing.T, helm, ns string, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(helm, append([]string{"template", "deckhand", chartDir(), "--namespace", ns, "--include-crds", "--kube-version", "v1.37.1"}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm template: %v: %s", err, stderr.String())
	}
	return stdout.Bytes()
}

func decode(t *testing.T, data []byte) []*unstructured.Unstructured {
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

// identities lists kind/namespace/name of every object, sorted.
func identities(objs []*unstructured.Unstructured) []string {
	ids := make([]string, 0, len(objs))
	for _, o := range objs {
		ids = append(ids, o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName())
	}
	slices.Sort(ids)
	return ids
}

// aggregation returns, by ClusterRole name, the built-in roles it is
// aggregated into (its rbac.authorization.k8s.io/aggregate-to-* labels).
func aggregation(objs []*unstructured.Unstructured) map[string][]string {
	out := map[string][]string{}
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" {
			continue
		}
		into := []string{}
		for k, v := range o.GetLabels() {
			if role, ok := strings.CutPrefix(k, "rbac.authorization.k8s.io/aggregate-to-"); ok && v == "true" {
				into = append(into, role)
			}
		}
		slices.Sort(into)
		out[o.GetName()] = into
	}
	return out
}

// specs returns, by name, what objects of kind say apart from metadata.
func specs(objs []*unstructured.Unstructured, kind string) map[string]any {
	out := map[string]any{}
	for _, o := range objs {
		if o.GetKind() != kind {
			continue
		}
		content := map[string]any{}
		for k, v := range o.Object {
			if k != "metadata" {
				content[k] = v
			}
		}
		if rules, ok := content["rules"].([]any); ok {
			// In any order: the chart adds the self-signed mode's rules
			// after the others (hack/helmsync splits them by mode).
			rules = slices.Clone(rules)
			slices.SortFunc(rules, func(a, b any) int {
				ja, _ := json.Marshal(a)
				jb, _ := json.Marshal(b)
				return strings.Compare(string(ja), string(jb))
			})
			content["rules"] = rules
		}
		out[o.GetName()] = content
	}
	return out
}

func writeObjects(t *testing.T, objs []*unstructured.Unstructured) string {
	t.Helper()
	list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List"}}
	for _, o := range objs {
		list.Items = append(list.Items, *o)
	}
	data, err := list.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "objects.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The webhooks answer through the apiserver with the certificate the
// manager issued itself: the configuration trusts the CA in the manager's
// Secret, and a bad object is refused by the webhook (not the schema).
func TestWebhooksServeTheSelfManagedCertificate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c.RunManager(t)

	secret := &corev1.Secret{}
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: "deckhand-webhook-server-cert"}, secret)).To(Succeed())
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Name: "deckhand-validating-webhook-configuration"}, cfg)).To(Succeed())
	g.Expect(cfg.Webhooks).NotTo(BeEmpty())
	for _, w := range cfg.Webhooks {
		g.Expect(w.ClientConfig.CABundle).To(Equal(secret.Data["ca.crt"]), w.Name)
	}

	// Only the webhook compiles regular expressions: the schema cannot.
	expectTheWebhookRefusesABadPattern(t, g)
}

// expectTheWebhookRefusesABadPattern dry-runs a JobWatcher whose pattern
// does not compile: only the webhook can refuse it, naming the field.
func expectTheWebhookRefusesABadPattern(t *testing.T, g Gomega) {
	t.Helper()
	bad := &deckhandbatchv1.JobWatcher{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace(t, nil), Name: "bad-regex"},
		Spec: deckhandbatchv1.JobWatcherSpec{JobPolicy: deckhandbatchv1.JobPolicy{
			TTLSecondsAfterSucceeded: ptr.To[int32](10),
			JobNamePatterns:          []string{"([a-z"},
		}},
	}
	err := c.Client.Create(context.Background(), bad, client.DryRunAll)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid from the webhook, got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("spec.jobNamePatterns[0]"))
	g.Expect(err.Error()).To(ContainSubstring("error parsing regexp"))
}

// The manager and the plugin as `make build` makes them say the release
// they are (VERSION), as --version and `kubectl deckhand version`; the
// manager's deckhand_build_info says it too (internal/manager's monitoring
// test).
func TestTheBinariesSayTheirRelease(t *testing.T) {
	want, err := os.ReadFile(filepath.Join(repoRoot(), "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	release := "v" + strings.TrimSpace(string(want))
	bin := os.Getenv("DECKHAND_BIN")
	if bin == "" {
		bin = filepath.Join(repoRoot(), "bin", "deckhand")
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil || string(out) != "deckhand "+release+"\n" {
		t.Errorf("deckhand --version: %q, %v; want %q", out, err, "deckhand "+release)
	}
	out2, err := kubectlDeckhand(t, "version")
	if err != nil || out2 != "kubectl-deckhand "+release+"\n" {
		t.Errorf("kubectl deckhand version: %q, %v; want %q", out2, err, "kubectl-deckhand "+release)
	}
}

// The local cluster's apiserver presents a client certificate to the
// webhooks it calls (hack/cluster.sh): a manager that demands one
// (--webhook-client-ca-file) still admits and refuses through the
// apiserver, and still converts (the apiserver converts without one).
// internal/webhookauth shows a review written by hand refused.
func TestWebhooksDemandingTheApiserversClientCertificateStillAdmit(t *testing.T) {
	g := NewWithT(t)
	c.RunManager(t, "--webhook-client-ca-file", c.WebhookClientCA())

	expectTheWebhookRefusesABadPattern(t, g)
	// PodSets read as v1alpha1: each one there is goes through /convert.
	_, err := c.Kubectl("get", "podsets.v1alpha1.apps.deckhand.dev", "-A")
	g.Expect(err).NotTo(HaveOccurred())
}
