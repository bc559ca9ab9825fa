package installs

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// A release of the previous chart, whose manager created the certificate
// Secret itself (kubernetes.io/tls, no Helm ownership), upgrades to this
// chart, which ships the Secret: Helm cannot adopt a Secret it does not own
// and would refuse the upgrade, so the chart leaves that one out and the
// manager goes on with it, its certificate untouched. Labelled and
// annotated for Helm (docs/operations/upgrading.md), it is adopted, still
// untouched. A fresh install ships it; an upgrade then keeps what the
// manager wrote into it.
func TestHelmUpgradeKeepsTheSecretAnEarlierManagerCreated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	helm := helmBinary(t)
	kubeconfig := env.AdminKubeconfig(t)
	const ns = "deckhand-system"
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	helmRun := func(args ...string) (string, error) {
		out, err := exec.Command(helm, append(args, "-n", ns, "--kubeconfig", kubeconfig)...).CombinedOutput()
		return string(out), err
	}
	chart := filepath.Join(root(t), "charts", "deckhand")

	g.Expect(helmRun("install", "deckhand", previousChart(t))).Error().NotTo(HaveOccurred())
	earlier := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deckhand-webhook-server-cert"},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"ca.crt": []byte("the earlier CA"), corev1.TLSCertKey: []byte("cert"), corev1.TLSPrivateKeyKey: []byte("key")},
	}
	g.Expect(env.Client.Create(ctx, earlier)).To(Succeed())

	for range 2 { // the upgrade, and the one after it
		out, err := helmRun("upgrade", "deckhand", chart, "--reset-then-reuse-values")
		g.Expect(err).NotTo(HaveOccurred(), "helm upgrade: %s", out)
		secret := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(earlier), secret)).To(Succeed())
		g.Expect(secret.Data).To(Equal(earlier.Data), "the upgrade changed the earlier manager's certificate")
		g.Expect(secret.Type).To(Equal(corev1.SecretTypeTLS))
	}

	// Labelled and annotated for Helm, as upgrading.md says, the release
	// adopts it at the next upgrade, keeping what the manager wrote.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(earlier), earlier)).To(Succeed())
	earlier.Labels = map[string]string{"app.kubernetes.io/managed-by": "Helm"}
	earlier.Annotations = map[string]string{"meta.helm.sh/release-name": "deckhand", "meta.helm.sh/release-namespace": ns}
	g.Expect(env.Client.Update(ctx, earlier)).To(Succeed())
	out, err := helmRun("upgrade", "deckhand", chart, "--reuse-values")
	g.Expect(err).NotTo(HaveOccurred(), "helm upgrade: %s", out)
	out, err = helmRun("get", "manifest", "deckhand")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("name: deckhand-webhook-server-cert"), "the release did not adopt the Secret")
	adopted := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(earlier), adopted)).To(Succeed())
	g.Expect(adopted.Data).To(Equal(earlier.Data), "the adoption changed the earlier manager's certificate")

	// Uninstalled (the adopted Secret goes with the release), then
	// installed afresh: the chart ships the Secret, and an
	// upgrade keeps what the manager wrote into it.
	g.Expect(helmRun("uninstall", "deckhand", "--wait")).Error().NotTo(HaveOccurred())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(earlier), &corev1.Secret{}))
	}).Should(BeTrue(), "helm uninstall left the adopted Secret")
	out, err = helmRun("install", "deckhand", chart)
	g.Expect(err).NotTo(HaveOccurred(), "helm install: %s", out)
	// Its notes say the webhook port is open, and how to narrow it, with
	// the kubernetes Service's endpoints as a hint.
	slice := &discoveryv1.EndpointSlice{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kubernetes"}, slice)).To(Succeed())
	g.Expect(slice.Endpoints).NotTo(BeEmpty())
	g.Expect(out).To(ContainSubstring("set\nnetworkPolicy.apiserverCIDRs to those addresses.\nThe kubernetes Service's endpoints here: " + slice.Endpoints[0].Addresses[0]))
	shipped := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(earlier), shipped)).To(Succeed())
	g.Expect(shipped.Data).To(BeEmpty())
	g.Expect(shipped.Annotations).To(HaveKeyWithValue("meta.helm.sh/release-name", "deckhand"))
	shipped.Data = map[string][]byte{"ca.crt": []byte("the manager's CA")}
	g.Expect(env.Client.Update(ctx, shipped)).To(Succeed())
	out, err = helmRun("upgrade", "deckhand", chart, "--reuse-values")
	g.Expect(err).NotTo(HaveOccurred(), "helm upgrade: %s", out)
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(earlier), shipped)).To(Succeed())
	g.Expect(shipped.Data).To(HaveKeyWithValue("ca.crt", []byte("the manager's CA")), "the upgrade emptied the Secret")
}

// previousChart is the chart of the previous release (the Makefile's
// PREVIOUS_RELEASE_COMMIT), whose manager created its certificate Secret,
// taken from git into a directory of the test's.
func previousChart(t *testing.T) string {
	t.Helper()
	makefile, err := os.ReadFile(filepath.Join(root(t), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^PREVIOUS_RELEASE_COMMIT\s*\?=\s*([0-9a-f]{40})$`).FindSubmatch(makefile)
	if m == nil {
		t.Fatal("the Makefile pins no PREVIOUS_RELEASE_COMMIT")
	}
	dir := t.TempDir()
	archive := exec.Command("git", "-C", root(t), "archive", string(m[1]), "charts/deckhand")
	out, err := archive.Output()
	if err != nil {
		t.Fatalf("the previous release's chart from git (%s): %v; a shallow clone: git fetch --unshallow", m[1], err)
	}
	untar := exec.Command("tar", "-x", "-C", dir)
	untar.Stdin = bytes.NewReader(out)
	if out, err := untar.CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, out)
	}
	return filepath.Join(dir, "charts", "deckhand")
}
