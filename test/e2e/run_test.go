//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// `make run` a second time on the cluster the first left running, what a
// developer does many times a day, failed: hack/install.sh applied the CRDs
// with the conversion webhook's Service while the running CRDs carried the
// URL of the first run's manager, and the apiserver refused both
// ("exactly one of url or service is required"). hack/run.sh is run here
// twice in a row, as `make run` runs it, against the suite's cluster; each
// run must come up ready, with the CRDs converting through it.
func TestMakeRunTwiceInARow(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	// A PodSet to read as v1alpha1: a list of none converts nothing.
	ns := c.Namespace(t, nil)
	set := &appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "converted"}}
	if err := c.Client.Create(context.Background(), set); err != nil {
		t.Fatal(err)
	}
	for run := 1; run <= 2; run++ {
		t.Run(fmt.Sprintf("run %d", run), func(t *testing.T) {
			g := NewWithT(t)
			port := func() string { _, p, _ := net.SplitHostPort(testenv.FreeAddr(t)); return p }
			webhook, health := port(), port()
			var logs strings.Builder
			cmd := exec.Command(filepath.Join(root, "hack", "run.sh"))
			cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig, "CHANGE_CLUSTER=yes",
				"DECKHAND_WEBHOOK_PORT="+webhook, "DECKHAND_METRICS_PORT="+port(), "DECKHAND_HEALTH_PORT="+health)
			cmd.Stdout, cmd.Stderr = &logs, &logs
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			g.Expect(cmd.Start()).To(Succeed())
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			t.Cleanup(func() {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
				select {
				case err := <-done:
					t.Logf("hack/run.sh ended: %v", err)
				case <-time.After(30 * time.Second):
					_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
					t.Logf("hack/run.sh killed after 30 s: %v", <-done)
				}
				if t.Failed() {
					t.Logf("make run's output:\n%s", logs.String())
				}
			})

			g.Eventually(func() (int, error) {
				select {
				case err := <-done:
					done <- err
					return 0, fmt.Errorf("hack/run.sh exited: %w", err)
				default:
				}
				resp, err := http.Get("http://127.0.0.1:" + health + "/readyz")
				if err != nil {
					return 0, err
				}
				_ = resp.Body.Close()
				return resp.StatusCode, nil
			}).WithTimeout(3*time.Minute).WithPolling(time.Second).Should(Equal(http.StatusOK), "make run did not come up")

			crd := &unstructured.Unstructured{}
			crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
			g.Expect(c.Client.Get(context.Background(), client.ObjectKey{Name: "podsets.apps.deckhand.dev"}, crd)).To(Succeed())
			clientConfig, _, _ := unstructured.NestedMap(crd.Object, "spec", "conversion", "webhook", "clientConfig")
			g.Expect(clientConfig).To(HaveKeyWithValue("url", "https://127.0.0.1:"+webhook+"/convert"))
			g.Expect(clientConfig).NotTo(HaveKey("service"))
			// The old version is served by converting through this run's
			// manager.
			g.Eventually(func() error {
				_, err := c.Kubectl("get", "podsets.v1alpha1.apps.deckhand.dev", "-n", ns, "converted")
				return err
			}).WithTimeout(time.Minute).Should(Succeed())
		})
	}
}

// `make run` on a cluster it did not start (KUBECONFIG names the suite's)
// says what it would change there and, not asked (no CHANGE_CLUSTER=yes, no
// terminal to answer its prompt), stops without changing the CRDs or the
// webhook configuration.
func TestMakeRunOnAnExistingClusterAsksFirst(t *testing.T) {
	g := NewWithT(t)
	root, err := testenv.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	ctx := context.Background()
	versions := func() []string {
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
		g.Expect(c.Client.Get(ctx, client.ObjectKey{Name: "podsets.apps.deckhand.dev"}, crd)).To(Succeed())
		cfg := &unstructured.Unstructured{}
		cfg.SetGroupVersionKind(schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfiguration"})
		err := c.Client.Get(ctx, client.ObjectKey{Name: "deckhand-validating-webhook-configuration"}, cfg)
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		return []string{crd.GetResourceVersion(), cfg.GetResourceVersion()}
	}
	before := versions()
	for _, webhooks := range []string{"true", "false"} {
		// Gone on, it would run the manager until killed.
		runCtx, cancel := context.WithTimeout(ctx, time.Minute)
		cmd := exec.CommandContext(runCtx, filepath.Join(root, "hack", "run.sh"))
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig, "CHANGE_CLUSTER=", "ENABLE_WEBHOOKS="+webhooks,
			"DECKHAND_WEBHOOK_PORT="+freePort(t), "DECKHAND_METRICS_PORT="+freePort(t), "DECKHAND_HEALTH_PORT="+freePort(t))
		out, err := cmd.CombinedOutput()
		cancel()
		var exit *exec.ExitError
		g.Expect(errors.As(err, &exit)).To(BeTrue(), "make run went on unasked:\n%s", out)
		g.Expect(exit.ExitCode()).To(Equal(3))
		g.Expect(string(out)).To(And(ContainSubstring("make run would"), ContainSubstring("CRDs"),
			ContainSubstring("deckhand-validating-webhook-configuration"), ContainSubstring("Nothing changed")))
		g.Expect(versions()).To(Equal(before), "the cluster's CRD or webhook configuration changed")
	}
}

func freePort(t *testing.T) string {
	_, p, _ := net.SplitHostPort(testenv.FreeAddr(t))
	return p
}
