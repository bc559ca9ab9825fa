//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/manager"
)

// The chart with watchNamespaces grants the manager pods, Jobs, Events and
// its kinds in those namespaces only: its ServiceAccount cannot touch a pod
// in another namespace, and a manager running as it (webhooks and all) does
// its work in its namespace without being refused anything.
func TestNamespacedInstallCannotTouchPodsOutsideItsNamespaces(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	helmNS := c.Namespace(t, map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	watched, other := c.Namespace(t, nil), c.Namespace(t, nil)

	// The chart's RBAC and ServiceAccount, rendered for one watched
	// namespace. Its cluster-wide objects are renamed for this test: the
	// installed copy keeps its own.
	objs := make([]*unstructured.Unstructured, 0, 8)
	suffix := "-" + helmNS
	for _, o := range decode(t, helmTemplate(t, helmBinary(t), helmNS, "--set", "watchNamespaces={"+watched+"}")) {
		switch o.GetKind() {
		case "ServiceAccount", "Role", "RoleBinding":
		case "Secret":
			// The webhook certificate's, which the chart ships empty for
			// the manager to fill: the manager may not create it.
		case "ClusterRole", "ClusterRoleBinding":
			if !strings.HasPrefix(o.GetName(), "deckhand-manager-") {
				continue
			}
			o.SetName(o.GetName() + suffix)
			if o.GetKind() == "ClusterRoleBinding" {
				g.Expect(unstructured.SetNestedField(o.Object, "deckhand-manager-role"+suffix, "roleRef", "name")).To(Succeed())
			}
			t.Cleanup(func() { _, _ = c.Kubectl("delete", strings.ToLower(o.GetKind()), o.GetName(), "--ignore-not-found") })
		default:
			continue
		}
		objs = append(objs, o)
	}
	_, err := c.Kubectl("apply", "--server-side", "-f", writeObjects(t, objs))
	g.Expect(err).NotTo(HaveOccurred())

	// Nothing on pods outside the watched namespace, nor cluster-wide.
	as := "system:serviceaccount:" + helmNS + ":deckhand-controller-manager"
	can := func(args ...string) string {
		out, _ := c.Kubectl(append([]string{"auth", "can-i", "--as", as}, args...)...)
		return strings.TrimSpace(out)
	}
	g.Expect(can("create", "pods", "-n", watched)).To(Equal("yes"))
	g.Expect(can("delete", "pods", "-n", watched)).To(Equal("yes"))
	for _, verb := range []string{"create", "delete", "patch", "list", "get"} {
		g.Expect(can(verb, "pods", "-n", other)).To(Equal("no"), verb+" pods in another namespace")
		g.Expect(can(verb, "pods", "--all-namespaces")).To(Equal("no"), verb+" pods cluster-wide")
	}
	g.Expect(can("update", "pods/ephemeralcontainers", "-n", other)).To(Equal("no"))
	g.Expect(can("delete", "jobs.batch", "-n", other)).To(Equal("no"))
	g.Expect(can("get", "secrets", "-n", watched)).To(Equal("no"))

	// As that ServiceAccount, a pod in another namespace cannot be deleted.
	kubeconfig := filepath.Join(t.TempDir(), "namespaced.kubeconfig")
	g.Expect(c.WriteKubeconfigFor(helmNS, "deckhand-controller-manager", kubeconfig)).To(Succeed())
	victim := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "victim"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1"}}},
	}
	g.Expect(c.Client.Create(ctx, victim)).To(Succeed())
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	sa, err := client.New(cfg, client.Options{Scheme: manager.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(apierrors.IsForbidden(sa.Delete(ctx, victim))).To(BeTrue(), "deleting a pod in another namespace")

	// A manager running as it watches its namespace and is refused nothing
	// it needs: its certificate Secret, its webhook configuration, the
	// PodSet's pods and status, its Events.
	p := c.RunManager(t, "--kubeconfig", kubeconfig, "--namespace", helmNS, "--watch-namespace", watched)
	mine, theirs := podSetOf(watched, 2), podSetOf(other, 2)
	g.Expect(c.Client.Create(ctx, mine)).To(Succeed())
	g.Expect(c.Client.Create(ctx, theirs)).To(Succeed())
	g.Eventually(func(g Gomega) {
		set := &appsv1beta1.PodSet{}
		g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(mine), set)).To(Succeed())
		g.Expect(set.Status.Replicas).To(BeEquivalentTo(2))
	}).WithTimeout(time.Minute).Should(Succeed())
	pods := &corev1.PodList{}
	g.Consistently(func(g Gomega) {
		g.Expect(c.Client.List(ctx, pods, client.InNamespace(other), client.MatchingLabels{appsv1beta1.PodSetLabel: theirs.Name})).To(Succeed())
		g.Expect(pods.Items).To(BeEmpty())
	}).WithTimeout(5 * time.Second).Should(Succeed())
	g.Expect(p.Logs()).NotTo(ContainSubstring("forbidden"), "the namespaced install lacks a right the manager uses")
}

func podSetOf(ns string, replicas int32) *appsv1beta1.PodSet {
	return &appsv1beta1.PodSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1beta1.PodSetSpec{Replicas: replicas, Template: &corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "busybox:1"}}},
		}},
	}
}

// The kustomize overlay for a namespaced install grants what the chart with
// the same watched namespace grants: the same cluster-wide rules, the same
// Role in the namespace, the manager told to watch it.
func TestNamespacedOverlayGrantsWhatTheChartGrants(t *testing.T) {
	g := NewWithT(t)
	out, err := c.Kubectl("kustomize", filepath.Join(repoRoot(), "config", "overlays", "namespaced"))
	g.Expect(err).NotTo(HaveOccurred())
	overlay := decode(t, []byte(out))
	chart := decode(t, helmTemplate(t, helmBinary(t), "deckhand-system", "--set", "watchNamespaces={deckhand-tenant}"))
	// A role's rules in any order: the chart adds the self-signed mode's
	// rules after the others (hack/helmsync splits them by mode).
	rules := func(objs []*unstructured.Unstructured, kind, namespace, name string) []string {
		for _, o := range objs {
			if o.GetKind() == kind && o.GetNamespace() == namespace && o.GetName() == name {
				list, _ := o.Object["rules"].([]any)
				out := make([]string, 0, len(list))
				for _, r := range list {
					b, _ := json.Marshal(r)
					out = append(out, string(b))
				}
				slices.Sort(out)
				return out
			}
		}
		t.Fatalf("no %s %s/%s", kind, namespace, name)
		return nil
	}
	for _, r := range []struct{ kind, namespace, name string }{
		{"ClusterRole", "", "deckhand-manager-role"},
		{"Role", "deckhand-tenant", "deckhand-manager-watch-role"},
		{"Role", "deckhand-system", "deckhand-manager-role"},
	} {
		g.Expect(rules(overlay, r.kind, r.namespace, r.name)).To(Equal(rules(chart, r.kind, r.namespace, r.name)), r.kind+" "+r.name)
	}
	g.Expect(out).To(ContainSubstring("--watch-namespace=deckhand-tenant"))
}
