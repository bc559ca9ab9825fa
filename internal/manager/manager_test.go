package manager_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

func TestReadyzAnswersOnceCachesSync(t *testing.T) {
	g := NewWithT(t)
	opts := env.ManagerOptions()
	opts.HealthProbeBindAddress = testenv.FreeAddr(t)
	env.StartManager(t, opts)

	for _, path := range []string{"/healthz", "/readyz"} {
		g.Eventually(func() (int, error) {
			resp, err := http.Get("http://" + opts.HealthProbeBindAddress + path)
			if err != nil {
				return 0, err
			}
			defer resp.Body.Close()
			return resp.StatusCode, nil
		}).WithTimeout(30*time.Second).Should(Equal(http.StatusOK), path)
	}
}

func TestMetricsNeedAnAuthorizedToken(t *testing.T) {
	g := NewWithT(t)
	opts := env.ManagerOptions()
	opts.MetricsBindAddress = testenv.FreeAddr(t)
	env.StartManager(t, opts)
	url := "https://" + opts.MetricsBindAddress + "/metrics"

	ns := env.Namespace(t)
	reader := serviceAccountToken(t, ns, "metrics-reader")
	stranger := serviceAccountToken(t, ns, "stranger")
	allowMetrics(t, ns, "metrics-reader")

	// The server is up once an anonymous request gets an answer at all.
	g.Eventually(scrape).WithArguments(url, "").WithTimeout(30 * time.Second).
		Should(HaveField("Code", http.StatusUnauthorized))
	g.Expect(scrape(url, stranger)).To(HaveField("Code", http.StatusForbidden))

	// RBAC bindings take effect asynchronously in the apiserver's authorizer.
	g.Eventually(scrape).WithArguments(url, reader).WithTimeout(30 * time.Second).Should(And(
		HaveField("Code", http.StatusOK),
		HaveField("Body", ContainSubstring("controller_runtime_"))))
}

// With --metrics-token-audiences, the reviews ask the apiserver for that
// audience: a token issued for the apiserver (what every pod mounts, and
// what a scraper could be tricked into sending elsewhere) is refused even
// for an allowed reader; the same reader's token for the audience is not.
func TestMetricsTokensMustBeForTheAudience(t *testing.T) {
	g := NewWithT(t)
	opts := env.ManagerOptions()
	opts.MetricsBindAddress = testenv.FreeAddr(t)
	opts.MetricsTokenAudiences = []string{"deckhand-metrics"}
	env.StartManager(t, opts)
	url := "https://" + opts.MetricsBindAddress + "/metrics"

	ns := env.Namespace(t)
	apiserverToken := serviceAccountToken(t, ns, "metrics-reader")
	audienceToken := tokenFor(t, ns, "metrics-reader", "deckhand-metrics")
	otherAudience := tokenFor(t, ns, "metrics-reader", "somewhere-else")
	allowMetrics(t, ns, "metrics-reader")

	g.Eventually(scrape).WithArguments(url, audienceToken).WithTimeout(30 * time.Second).Should(And(
		HaveField("Code", http.StatusOK),
		HaveField("Body", ContainSubstring("controller_runtime_"))))
	g.Expect(scrape(url, apiserverToken)).To(HaveField("Code", http.StatusUnauthorized))
	g.Expect(scrape(url, otherAudience)).To(HaveField("Code", http.StatusUnauthorized))
}

// allowMetrics lets the ServiceAccount ns/name GET /metrics.
func allowMetrics(t *testing.T, ns, name string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "metrics-reader-"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}
	g.Expect(env.Client.Create(ctx, role)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, role) })
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "metrics-reader-"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	}
	g.Expect(env.Client.Create(ctx, binding)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, binding) })
}

// With webhooks on, the metrics are served with the webhook certificate, so
// a scraper verifies them with the CA it trusts for the webhooks (in
// self-signed mode, ca.crt of the certificate Secret, which names the
// metrics Service too) instead of skipping verification.
func TestMetricsServeACertificateTheWebhookCAVouchesFor(t *testing.T) {
	g := NewWithT(t)
	opts := env.ManagerOptions()
	opts.MetricsBindAddress = testenv.FreeAddr(t)
	env.StartManager(t, opts)
	roots := x509.NewCertPool()
	g.Expect(roots.AppendCertsFromPEM(env.WebhookCA())).To(BeTrue())
	verified := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"},
	}}
	g.Eventually(func() error {
		resp, err := verified.Get("https://" + opts.MetricsBindAddress + "/metrics")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		return nil
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

type scrapeResult struct {
	Code int
	Body string
}

// scrape GETs url with token as bearer (none when empty). The self-signed
// serving certificate is not verified: what is under test is who may read.
func scrape(url, token string) (scrapeResult, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return scrapeResult{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // self-signed test server
	}}
	resp, err := c.Do(req)
	if err != nil {
		return scrapeResult{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return scrapeResult{Code: resp.StatusCode, Body: string(body)}, err
}

func TestOneLeaderAtATimeAndTakeover(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)

	opts := env.ManagerOptions()
	opts.LeaderElect = true
	opts.LeaderElectionNamespace = ns
	opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = 4*time.Second, 3*time.Second, 500*time.Millisecond

	first, stopFirst := env.StartManager(t, opts)
	g.Eventually(first.Elected()).WithTimeout(30 * time.Second).Should(BeClosed())
	// Webhooks are served by every replica, leader or not: the second one
	// needs a port of its own.
	_, port, err := net.SplitHostPort(testenv.FreeAddr(t))
	g.Expect(err).NotTo(HaveOccurred())
	opts.WebhookPort, err = strconv.Atoi(port)
	g.Expect(err).NotTo(HaveOccurred())
	second, _ := env.StartManager(t, opts)

	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: ns, Name: opts.LeaderElectionID}
	g.Expect(env.Client.Get(ctx, key, lease)).To(Succeed())
	firstHolder := *lease.Spec.HolderIdentity

	// Longer than a lease: the second manager keeps waiting while the first renews.
	g.Consistently(second.Elected()).WithTimeout(2 * opts.LeaseDuration).ShouldNot(BeClosed())
	g.Expect(env.Client.Get(ctx, key, lease)).To(Succeed())
	g.Expect(*lease.Spec.HolderIdentity).To(Equal(firstHolder))

	stopFirst()
	g.Eventually(second.Elected()).WithTimeout(30 * time.Second).Should(BeClosed())
	g.Expect(env.Client.Get(ctx, key, lease)).To(Succeed())
	g.Expect(lease.Spec.HolderIdentity).To(HaveValue(Not(Equal(firstHolder))))
}

// serviceAccountToken creates a ServiceAccount and returns a token for it
// from the TokenRequest API.
func serviceAccountToken(t *testing.T, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := env.Client.Create(ctx, sa); err != nil {
		t.Fatalf("creating service account: %v", err)
	}
	return tokenFor(t, ns, name)
}

// tokenFor is a token of the ServiceAccount ns/name for audiences (the
// apiserver's own when none).
func tokenFor(t *testing.T, ns, name string, audiences ...string) string {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(env.Config)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: audiences}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting token for %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}
