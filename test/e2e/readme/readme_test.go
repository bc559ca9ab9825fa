//go:build e2e

// Package readme follows README.md as a new user would, on a fresh local
// cluster with nothing installed: "Install a release" from the output of
// `make release` (which `make test-e2e` runs first), then "Try every kind".
// The commands are read from README.md's code blocks and run as written, so
// a README that drifts from what works fails here. Only what a cluster of
// simulated nodes cannot do is adapted, each time saying why: the manager
// runs from the release's image imported into the real node (kwok pods run
// nothing, and nothing here can pull from a registry), and what README.md
// watches with -w is waited for.
package readme

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/test/cluster"
)

var c *cluster.Cluster

// Nothing is installed: the test installs the release as README.md says.
func TestMain(m *testing.M) {
	cluster.MainWithInstall(m, &c, 3, func(*cluster.Cluster) error { return nil })
}

// The namespace README.md's commands act in: the kubeconfig's default.
const namespace = "default"

func TestReadmeInstallsTheReleaseAndTriesEveryKind(t *testing.T) {
	node := c.RealNode(t)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	version, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	release := filepath.Join("dist", "release", "v"+strings.TrimSpace(string(version)))
	u := &user{t: t, root: root, release: release, node: node}
	u.plugin = u.verifyRelease()

	for _, cmd := range commands(t, readme, "Install a release") {
		u.run(cmd)
	}
	for _, cmd := range commands(t, readme, "Try every kind") {
		u.run(cmd)
	}
	u.everyKindWorks()
}

// user runs README.md's commands: the project's kubectl, the release's
// plugin on PATH, the suite's cluster, in the repository's root.
type user struct {
	t                   *testing.T
	root, release, node string
	plugin              string // the directory holding the release's kubectl-deckhand
}

// verifyRelease checks every file of the release against SHA256SUMS and
// unpacks the plugin for this machine, returning its directory.
func (u *user) verifyRelease() string {
	t := u.t
	dir := filepath.Join(u.root, u.release)
	sums, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatalf("no release in %s (make test-e2e runs make release first): %v", u.release, err)
	}
	listed := 0
	for line := range strings.Lines(string(sums)) {
		want, name, ok := strings.Cut(strings.TrimSpace(line), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS: malformed line %q", line)
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != want {
			t.Fatalf("SHA256SUMS: %s does not match its sum", name)
		}
		listed++
	}
	for _, name := range []string{"install.yaml", "deckhand.tar", "SHA256SUMS"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Fatalf("the release lacks %s: %v", name, err)
		}
	}
	archive := filepath.Join(dir, fmt.Sprintf("kubectl-deckhand_%s_%s.tar.gz", runtime.GOOS, runtime.GOARCH))
	out := t.TempDir()
	if err := untar(archive, out); err != nil {
		t.Fatalf("unpacking the plugin: %v", err)
	}
	t.Logf("release %s: %d files match SHA256SUMS", u.release, listed)
	return out
}

// run runs one command of README.md, as written unless it is one of the
// few this cluster cannot take as they are.
func (u *user) run(cmd string) {
	t := u.t
	t.Helper()
	switch {
	case cmd == "make release":
		// `make test-e2e` ran it before this suite; verifyRelease checked
		// its output.
		return
	case strings.HasPrefix(cmd, "export KUBECONFIG="):
		// make run's cluster and tools; the suite's are set for every
		// command below.
		return
	case strings.Contains(cmd, "rollout status"):
		u.placeManagerOnRealNode()
	case strings.HasSuffix(cmd, " -w"):
		wait, ok := waits[strings.Join(strings.Fields(cmd), " ")]
		if !ok {
			t.Fatalf("README.md watches with %q: say here what it waits for", cmd)
		}
		wait(u)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sh := exec.CommandContext(ctx, "sh", "-c", cmd)
	sh.Dir = u.root
	sh.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig,
		"PATH="+u.plugin+string(os.PathListSeparator)+filepath.Join(u.root, "bin", "k8s")+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := sh.CombinedOutput()
	t.Logf("$ %s\n%s", cmd, out)
	if err != nil {
		t.Fatalf("README.md's %q failed: %v\n%s", cmd, err, out)
	}
}

// waits say what README.md's watches (-w) wait for.
var waits = map[string]func(*user){
	// The Job succeeds on a kwok node and the JobWatcher deletes it 10 s
	// later.
	"kubectl get jobwatcher,jobs -w": func(u *user) {
		job := &batchv1.Job{}
		key := client.ObjectKey{Namespace: namespace, Name: "pi"}
		NewWithT(u.t).Eventually(func() bool {
			return apierrors.IsNotFound(c.Client.Get(context.Background(), key, job))
		}).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(BeTrue(), "the JobWatcher never deleted Job pi")
	},
	// A kwok pod does not crash: the crasher runs there without failing.
	// PodIncidents of a real crash are tested on the real node
	// (test/e2e/realnode_incident_test.go).
	"kubectl get podincidents -w": func(u *user) {
		u.t.Log("kwok pods do not crash: PodIncidents are tested on the real node (realnode_incident_test.go)")
	},
}

// placeManagerOnRealNode imports the release's image into the real node and
// moves the installed manager there: on a kwok node its pod would run
// nothing. A user's nodes pull the image from their registry instead.
func (u *user) placeManagerOnRealNode() {
	t := u.t
	out, err := exec.Command(filepath.Join(u.root, "hack", "realnode.sh"), "load", c.Name,
		filepath.Join(u.root, u.release, "deckhand.tar")).CombinedOutput()
	if err != nil {
		t.Fatalf("importing the release's image: %v\n%s", err, out)
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"nodeSelector": map[string]string{cluster.RealNodeLabel: "true"},
		"tolerations":  []corev1.Toleration{cluster.RealNodeToleration()},
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := c.Kubectl("-n", cluster.Namespace, "patch", "deployment", "deckhand-controller-manager", "--type=strategic", "-p", string(patch)); err != nil {
		t.Fatalf("placing the manager on the real node: %v\n%s", err, out)
	}
	if out, err := c.Kubectl("-n", cluster.Namespace, "patch", "deployment", "deckhand-controller-manager", "--type=json",
		"-p", `[{"op":"add","path":"/spec/template/spec/containers/0/imagePullPolicy","value":"Never"}]`); err != nil {
		t.Fatalf("placing the manager on the real node: %v\n%s", err, out)
	}
	t.Logf("the manager runs on the real node %s from the release's image", u.node)
}

// everyKindWorks checks what README.md's commands promise, through the
// release's `kubectl deckhand status`: every object Ready, the PodSet scaled
// to 5, the ModelBox's Deployment and Service made, the debug container in
// the pod web.
func (u *user) everyKindWorks() {
	t := u.t
	g := NewWithT(t)
	ready := map[string]bool{
		"PodSet podset-sample": false, "ModelBox modelbox-sample": false,
		"JobWatcher jobwatcher-sample": false, "PodBugger web-debug": false,
	}
	var last string
	g.Eventually(func() error {
		out, err := u.output("kubectl", "deckhand", "status", "-n", namespace)
		if err != nil {
			return err
		}
		last = out
		for line := range strings.Lines(out) {
			f := strings.Fields(line)
			if len(f) >= 4 {
				if _, ok := ready[f[0]+" "+f[2]]; ok {
					ready[f[0]+" "+f[2]] = f[3] == "True"
				}
			}
		}
		for obj, ok := range ready {
			if !ok {
				return fmt.Errorf("%s is not Ready", obj)
			}
		}
		return nil
	}).WithTimeout(3*time.Minute).WithPolling(2*time.Second).Should(Succeed(), func() string { return "kubectl deckhand status:\n" + last })
	t.Logf("$ kubectl deckhand status -n %s\n%s", namespace, last)

	pods := &corev1.PodList{}
	g.Expect(c.Client.List(context.Background(), pods, client.InNamespace(namespace))).To(Succeed())
	owned := 0
	for _, p := range pods.Items {
		for _, ref := range p.OwnerReferences {
			if ref.Kind == "PodSet" && ref.Name == "podset-sample" && p.DeletionTimestamp == nil {
				owned++
			}
		}
	}
	g.Expect(owned).To(Equal(5), "pods of podset-sample after kubectl scale --replicas=5")

	out, err := u.output("kubectl", "get", "deployment,service", "-n", namespace, "-o", "name")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(And(ContainSubstring("deployment.apps/"), ContainSubstring("service/")), "the ModelBox's children")

	g.Eventually(func() ([]string, error) {
		pod := &corev1.Pod{}
		err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: "web"}, pod)
		names := make([]string, 0, len(pod.Spec.EphemeralContainers))
		for _, e := range pod.Spec.EphemeralContainers {
			names = append(names, e.Name)
		}
		return names, err
	}).WithTimeout(time.Minute).ShouldNot(BeEmpty(), "the PodBugger's debug container in pod web")
}

// output runs a command as run does and returns its output.
func (u *user) output(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = u.root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig,
		"PATH="+u.plugin+string(os.PathListSeparator)+filepath.Join(u.root, "bin", "k8s")+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// commands returns the shell commands of the first sh code block after the
// heading named section: comments and blank lines dropped, a line ending in
// a backslash joined with the next.
func commands(t *testing.T, readme []byte, section string) []string {
	t.Helper()
	var (
		out                []string
		inSection, inBlock bool
		pending            string
	)
	s := bufio.NewScanner(bytes.NewReader(readme))
	for s.Scan() {
		line := s.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			if inSection && len(out) > 0 {
				return out
			}
			inSection = strings.TrimPrefix(line, "## ") == section
		case inSection && strings.HasPrefix(line, "```"):
			if inBlock {
				return out
			}
			inBlock = line == "```sh"
		case inBlock:
			line = strings.TrimSpace(line)
			if pending != "" {
				line = pending + " " + line
				pending = ""
			}
			if rest, ok := strings.CutSuffix(line, `\`); ok {
				pending = strings.TrimSpace(rest)
				continue
			}
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			out = append(out, stripComment(line))
		}
	}
	if len(out) == 0 {
		t.Fatalf("README.md has no sh block under %q", section)
	}
	return out
}

// stripComment drops a trailing "  # ..." comment outside quotes.
func stripComment(line string) string {
	var quote rune
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && i > 0 && line[i-1] == ' ':
			return strings.TrimSpace(line[:i])
		}
	}
	return line
}

func untar(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	z, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	r := tar.NewReader(z)
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg || strings.Contains(h.Name, "/") {
			return fmt.Errorf("unexpected entry %q", h.Name)
		}
		w, err := os.OpenFile(filepath.Join(dir, h.Name), os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
		if err != nil {
			return err
		}
		_, err = io.Copy(w, io.LimitReader(r, 256<<20))
		if err := errors.Join(err, w.Close()); err != nil {
			return err
		}
	}
}
