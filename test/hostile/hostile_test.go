// Package hostile runs the manager as the deployment does, a process under
// the memory limit it ships with, and feeds it every hostile object a
// namespace editor can write (docs/operations/security.md). It runs in `make test`
// (about a minute): each object is refused naming its field or bounded, the
// manager stays up with its peak RSS under the limit, and another tenant's
// PodSet keeps reconciling meanwhile, its failures are recorded beside a
// crash storm and its due Jobs deleted beside a burst the breaker holds.
package hostile_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/internal/testenv/proc"
)

// shippedLimit is the manager container's memory limit in the installs
// (config/manager/manager.yaml, the chart's resources.limits.memory); the
// manager sets GOMEMLIMIT to 90% of it.
const (
	shippedLimit   = 256 << 20
	shippedLimitIn = "memory: 256Mi"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// process is the manager binary running against envtest.
type process struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	logs bytes.Buffer
	done chan struct{}
}

func (p *process) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.Write(b)
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// peakRSS is the process's peak resident set (VmHWM), in bytes.
func (p *process) peakRSS() (int64, error) { return proc.StatusBytes(p.cmd.Process.Pid, "VmHWM") }

// cpuTime is the CPU time the process has used (user and system), to the
// kernel's 10 ms tick.
func (p *process) cpuTime() (time.Duration, error) {
	st, err := proc.ReadStat(p.cmd.Process.Pid)
	return st.CPU, err
}

// startManager builds cmd/deckhand and runs it as the installs do (the
// shipped GOMEMLIMIT, every controller, webhooks on), against envtest.
func startManager(t *testing.T) *process {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := os.ReadFile(filepath.Join(root, "config", "manager", "manager.yaml"))
	if err != nil || !bytes.Contains(manifest, []byte(shippedLimitIn)) {
		t.Fatalf("config/manager/manager.yaml no longer ships %q: update shippedLimit (%v)", shippedLimitIn, err)
	}
	bin := filepath.Join(t.TempDir(), "deckhand")
	build := exec.Command("go", "build", "-o", bin, "./cmd/deckhand")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the manager: %v\n%s", err, out)
	}
	opts := env.ManagerOptions()
	health := testenv.FreeAddr(t)
	p := &process{done: make(chan struct{})}
	p.cmd = exec.Command(bin,
		"--kubeconfig", env.AdminKubeconfig(t),
		"--namespace", env.Namespace(t),
		"--metrics-bind-address", "0",
		"--health-probe-bind-address", health,
		"--webhook-host", opts.WebhookHost,
		"--webhook-port", strconv.Itoa(opts.WebhookPort),
		"--webhook-cert-dir", opts.WebhookCertDir,
		"--webhook-cert-mode", "external",
		"--podbugger-allowed-images", "docker.io/library/busybox:*",
	)
	p.cmd.Env = append(os.Environ(), fmt.Sprintf("GOMEMLIMIT=%dMiB", shippedLimit*9/10>>20))
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			p.mu.Lock()
			t.Logf("manager logs (last 8 KiB):\n%s", tail(p.logs.String(), 8<<10))
			p.mu.Unlock()
		}
	})
	NewWithT(t).Eventually(func() (int, error) {
		if p.exited() {
			return 0, fmt.Errorf("the manager exited")
		}
		resp, err := http.Get("http://" + health + "/readyz")
		if err != nil {
			return 0, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Equal(http.StatusOK))
	return p
}

// artifactsCollector is a PodBugger of "x" pods that records their errors
// and collects the artifacts a says (its debug container, started on every
// running pod, collects them).
func artifactsCollector(ns, name string, a debugv1beta1.IncidentArtifacts) *debugv1beta1.PodBugger {
	return &debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: debugv1beta1.PodBuggerSpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
			Image:     "docker.io/library/busybox:1.37",
			Triggers:  []debugv1beta1.Trigger{debugv1beta1.TriggerRunning, debugv1beta1.TriggerError},
			Incidents: &debugv1beta1.IncidentPolicy{Artifacts: &a}}}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// bomb is 1,023 bytes that RE2 compiles to a million instructions (267 MB
// and half a second per compile).
var bomb = "(?:" + strings.Repeat("a", 1013) + "){1000}"

const hugeReplicas = 500

func template(app string) *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox:1"}}},
	}
}

// hugeTemplate is close to the largest template a PodSet can hold: 200 KiB
// of annotations and 700 KiB of environment.
func hugeTemplate() *corev1.PodTemplateSpec {
	t := template("huge")
	t.Annotations = map[string]string{"example.com/ballast": strings.Repeat("x", 200<<10)}
	for i := range 7 {
		t.Spec.Containers[0].Env = append(t.Spec.Containers[0].Env, corev1.EnvVar{Name: fmt.Sprintf("BALLAST_%d", i), Value: strings.Repeat("y", 100<<10)})
	}
	return t
}

func TestAManagerUnderItsLimitSurvivesEveryHostileObject(t *testing.T) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(45 * time.Second)
	ctx := context.Background()
	p := startManager(t)
	hostile := env.NamespaceWithLabels(t, map[string]string{debugv1beta1.NamespaceEnabledLabel: "true"})
	other := env.Namespace(t)

	// Another tenant's PodSet, before and while the hostile objects come.
	neighbour := &appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "neighbour"},
		Spec: appsv1beta1.PodSetSpec{Replicas: 2, Template: template("neighbour")}}
	g.Expect(env.Client.Create(ctx, neighbour)).To(Succeed())

	refused := map[string]struct {
		obj  client.Object
		want string // the field the refusal names
	}{
		"a regex bomb":                       {watcher(hostile, "bomb", []string{"pi-.*", bomb}, nil), "spec.jobNamePatterns[1]"},
		"a regex bomb in an exclusion":       {watcher(hostile, "bomb-excluded", nil, []string{bomb}), "spec.excludeJobNamePatterns[0]"},
		"Unicode classes":                    {watcher(hostile, "unicode", []string{strings.Repeat(`\pL`, 341)}, nil), "spec.jobNamePatterns[0]"},
		"Unicode classes under (?i)":         {watcher(hostile, "unicode-folded", nil, []string{"(?i)" + strings.Repeat(`\pL`, 339)}), "spec.excludeJobNamePatterns[0]"},
		"negated Unicode classes":            {watcher(hostile, "unicode-negated", []string{"x", strings.Repeat(`[^\pL]`, 170)}, nil), "spec.jobNamePatterns[1]"},
		"wide ranges under (?i)":             {watcher(hostile, "folded-ranges", []string{"(?i)[" + strings.Repeat("B-\U0001e942", 169) + "]"}, nil), "spec.jobNamePatterns[0]"},
		"too many patterns":                  {watcher(hostile, "many", repeat("a.*", 65), nil), "spec.jobNamePatterns"},
		"patterns that compile big together": {watcher(hostile, "together", repeat("(?:[a-z]{1,40}-){20}", 64), nil), "spec.jobNamePatterns[5]"},
		"a long PodBugger command": {&debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: hostile, Name: "long-command"},
			Spec: debugv1beta1.PodBuggerSpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
				Image: "docker.io/library/busybox:1.37", Command: []string{strings.Repeat("x", 1025)}}}, "spec.command[0]"},
		"long PodBugger args together": {&debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: hostile, Name: "long-args"},
			Spec: debugv1beta1.PodBuggerSpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
				Image: "docker.io/library/busybox:1.37", Args: repeat(strings.Repeat("x", 4096), 5)}}, "spec.args"},
		"many PodBugger args": {&debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: hostile, Name: "many-args"},
			Spec: debugv1beta1.PodBuggerSpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
				Image: "docker.io/library/busybox:1.37", Args: repeat("x", 257)}}, "spec.args"},
		"a PodBugger keeping a 1 MiB log tail": {&debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: hostile, Name: "big-tail"},
			Spec: debugv1beta1.PodBuggerSpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
				Image: "docker.io/library/busybox:1.37", Triggers: []debugv1beta1.Trigger{debugv1beta1.TriggerError},
				Incidents: &debugv1beta1.IncidentPolicy{LogTailBytes: ptr.To[int32](1 << 20)}}}, "spec.incidents.logTailBytes"},
		"a PodBugger keeping 100,000 records": {&debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: hostile, Name: "many-records"},
			Spec: debugv1beta1.PodBuggerSpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
				Image: "docker.io/library/busybox:1.37", Triggers: []debugv1beta1.Trigger{debugv1beta1.TriggerError},
				Incidents: &debugv1beta1.IncidentPolicy{MaxRecords: 100000}}}, "spec.incidents.maxRecords"},
		"a PodBugger copying a terabyte of artifacts at each failure": {artifactsCollector(hostile, "tera", debugv1beta1.IncidentArtifacts{Volume: "dumps",
			MaxBytes: ptr.To[int64](1 << 40)}), "spec.incidents.artifacts.maxBytes"},
		"a PodBugger collecting artifacts beside nine containers": {artifactsCollector(hostile, "nine", debugv1beta1.IncidentArtifacts{Volume: "dumps",
			Containers: []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}}), "spec.incidents.artifacts.containers"},
		"a PodBugger collecting artifacts from a path": {artifactsCollector(hostile, "path", debugv1beta1.IncidentArtifacts{Volume: "../../etc"}),
			"spec.incidents.artifacts.volume"},
		"a PodSet whose pods the apiserver refuses, many times over": {&appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: hostile, Name: "refused"},
			Spec: appsv1beta1.PodSetSpec{Replicas: 1, Template: missingVolumesTemplate(500)}}, "spec.template.spec.containers[0].volumeMounts[499].name"},
	}
	for name, tc := range refused {
		err := env.Client.Create(ctx, tc.obj)
		g.Expect(err).To(HaveOccurred(), name+": admitted")
		g.Expect(err).To(MatchError(ContainSubstring(tc.want+": ")), name)
		if len(err.Error()) > 300 {
			t.Logf("%s: refused (%d bytes): %s …", name, len(err.Error()), err.Error()[:300])
		} else {
			t.Logf("%s: refused: %v", name, err)
		}
	}

	// Admitted and bounded: a watcher of the costliest patterns the bounds
	// admit (classes, optional parts in a row, the instruction bound). What
	// admitting it costs the manager is reported, not asserted (a shared
	// machine's timing): the policy package's benchmark bounds it.
	before, err := p.cpuTime()
	g.Expect(err).NotTo(HaveOccurred())
	start := time.Now()
	g.Expect(env.Client.Create(ctx, watcher(hostile, "costliest", costliestPatterns(), nil))).To(Succeed())
	after, err := p.cpuTime()
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("admitting the costliest watcher: %v, %v of the manager's CPU (its other work included)", time.Since(start).Round(time.Millisecond), after-before)

	// Admitted and bounded: a huge template at hugeReplicas replicas (about
	// 450 MiB of templates, which cached once per pod put the manager over
	// its limit), its pods cached without it and created at most 16 MiB of
	// template at a time.
	huge := &appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: hostile, Name: "huge"},
		Spec: appsv1beta1.PodSetSpec{Replicas: hugeReplicas, Template: hugeTemplate()}}
	g.Expect(env.Client.Create(ctx, huge)).To(Succeed())

	// Admitted and bounded: a PodBugger recording a pod that crashed with a
	// 64 KiB termination message and a 64 KiB status message; its record
	// keeps 1 KiB of each.
	recorder := &debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: hostile, Name: "recorder"},
		Spec: debugv1beta1.PodBuggerSpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "crash"}},
			Image: "docker.io/library/busybox:1.37", Triggers: []debugv1beta1.Trigger{debugv1beta1.TriggerError}}}
	g.Expect(env.Client.Create(ctx, recorder)).To(Succeed())
	crash := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: hostile, Name: "crash", Labels: map[string]string{"app": "crash"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}
	g.Expect(env.Client.Create(ctx, crash)).To(Succeed())
	crash.Status = corev1.PodStatus{Phase: corev1.PodRunning, Message: strings.Repeat("m", 64<<10),
		ContainerStatuses: []corev1.ContainerStatus{{Name: "main", Image: "busybox", ImageID: "busybox",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: strings.Repeat("t", 64<<10),
				FinishedAt: metav1.Now()}}}}}
	g.Expect(env.Client.Status().Update(ctx, crash)).To(Succeed())
	g.Eventually(func(g Gomega) {
		list := &debugv1beta1.PodIncidentList{}
		g.Expect(env.Client.List(ctx, list, client.InNamespace(hostile))).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1))
		g.Expect(list.Items[0].Spec.Pod.Message).To(HaveLen(debugv1beta1.MaxIncidentMessage))
		g.Expect(list.Items[0].Spec.LastFailure.Message).To(HaveLen(debugv1beta1.MaxIncidentMessage))
	}).Should(Succeed())

	// Refused and bounded: reviews written by hand to the webhook port, as
	// any pod that reaches it could.
	forgedReviews(t, g, hostile, other)

	// Admitted and bounded: a crash storm of stormPods pods and a burst of
	// noisyJobs Jobs due at once, each beside another tenant's one failure
	// and few due Jobs, which are served all the same.
	crashStorm(t, g, hostile, other)
	noisyTenantBreaker(t, g, hostile, other)

	// The neighbour scales meanwhile, and gets there.
	g.Expect(env.Update(neighbour, func() { neighbour.Spec.Replicas = 5 })).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &appsv1beta1.PodSet{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(neighbour), got)).To(Succeed())
		g.Expect(got.Status.Replicas).To(BeEquivalentTo(5))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		got := &appsv1beta1.PodSet{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(huge), got)).To(Succeed())
		g.Expect(got.Status.Replicas).To(BeEquivalentTo(hugeReplicas))
	}).Should(Succeed())

	g.Expect(p.exited()).To(BeFalse(), "the manager died")
	rss, err := p.peakRSS()
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("peak RSS %d MiB (limit %d MiB)", rss>>20, shippedLimit>>20)
	g.Expect(rss).To(BeNumerically("<", shippedLimit), "peak RSS over the shipped memory limit")
}

func watcher(ns, name string, include, exclude []string) *deckhandbatchv1.JobWatcher {
	w := &deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	w.Spec.JobNamePatterns, w.Spec.ExcludeJobNamePatterns = include, exclude
	ttl := int32(60)
	w.Spec.TTLSecondsAfterSucceeded = &ttl
	return w
}

// costliestPatterns come near every bound on a watcher's patterns: the
// runes of Unicode classes, 129 optional parts in a row (which cost Go's
// one-pass matcher the cube of their number: 14 MB to compile one), the
// instructions.
func costliestPatterns() []string {
	var chain strings.Builder
	for c := 'a'; chain.Len() < 1000; c += 2 {
		chain.WriteString("[" + string(c) + "-" + string(c+1) + "]*")
	}
	return []string{`(?i)[\pC\pL\pN\pM]{1,1000}`, `[\pL\pN\pM]{1,1000}`, chain.String(), chain.String(),
		strings.Repeat("a", 1000), strings.Repeat("b", 1000), strings.Repeat("c", 900)}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// missingVolumesTemplate mounts n volumes the pod does not have: the
// apiserver's refusal lists every one.
func missingVolumesTemplate(n int) *corev1.PodTemplateSpec {
	t := template("refused")
	for i := range n {
		t.Spec.Containers[0].VolumeMounts = append(t.Spec.Containers[0].VolumeMounts,
			corev1.VolumeMount{Name: fmt.Sprintf("missing-%d-%s", i, strings.Repeat("z", 40)), MountPath: fmt.Sprintf("/m/%d", i)})
	}
	return t
}

const (
	// stormPods is how many pods of the hostile namespace crash at once.
	stormPods = 500
	// noisyJobs is how many Jobs the hostile namespace makes due at once,
	// against a ClusterJobWatcher's limit of noisyLimit a minute.
	noisyJobs, noisyLimit = 300, 50
)

// crashStorm makes stormPods pods of ns crash at once under a PodBugger
// recording them, then one pod of other: other's failure is recorded, and
// its Event written, however many of the storm's wait (the recorder's
// queues serve namespaces in turn, each up to its share).
func crashStorm(t *testing.T, g *WithT, ns, other string) {
	t.Helper()
	ctx := context.Background()
	record := func(ns, app string) {
		g.Expect(env.Client.Create(ctx, &debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app},
			Spec: debugv1beta1.PodBuggerSpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
				Image: "docker.io/library/busybox:1.37", Triggers: []debugv1beta1.Trigger{debugv1beta1.TriggerError}}})).To(Succeed())
	}
	record(ns, "storm")
	record(other, "lonely")
	crashed := func(ns, name, app string) error {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}
		if err := env.Client.Create(ctx, p); err != nil {
			return err
		}
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "main", Image: "busybox", ImageID: "busybox",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: metav1.Now()}}}}}
		return env.Client.Status().Update(ctx, p)
	}
	inParallel(t, stormPods, func(i int) error { return crashed(ns, fmt.Sprintf("storm-%d", i), "storm") })
	g.Expect(crashed(other, "lonely", "lonely")).To(Succeed())
	g.Eventually(func() ([]debugv1beta1.PodIncident, error) {
		list := &debugv1beta1.PodIncidentList{}
		err := env.Client.List(ctx, list, client.InNamespace(other))
		return list.Items, err
	}).Should(ConsistOf(HaveField("Spec.Pod.Name", "lonely")))
	g.Eventually(env.Events(other, nil)).Should(ContainElement(HavePrefix("IncidentRecorded: Pod lonely")))
	list := &debugv1beta1.PodIncidentList{}
	g.Expect(env.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	t.Logf("a crash storm of %d pods: %d of its records written when the other tenant's failure was recorded, with its Event", stormPods, len(list.Items))
}

// noisyTenantBreaker makes noisyJobs Jobs of ns due at once under a
// platform ClusterJobWatcher that also reaches other, where a few are due:
// the watcher's breaker holds ns alone, and other is cleaned up.
func noisyTenantBreaker(t *testing.T, g *WithT, ns, other string) {
	t.Helper()
	ctx := context.Background()
	finishedJobs := func(ns, prefix string, n int) {
		inParallel(t, n, func(i int) error {
			job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%04d", prefix, i)},
				Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}}}
			if err := env.Client.Create(ctx, job); err != nil {
				return err
			}
			testenv.FinishJob(job, batchv1.JobComplete, time.Now().Add(-time.Hour))
			return env.Client.Status().Update(ctx, job)
		})
	}
	const few = 5
	finishedJobs(ns, "burst", noisyJobs)
	finishedJobs(other, "old", few)
	w := &deckhandbatchv1.ClusterJobWatcher{ObjectMeta: metav1.ObjectMeta{GenerateName: "platform-"}}
	w.Spec.NamespacePatterns = []string{ns, other}
	w.Spec.TTLSecondsAfterSucceeded = ptr.To[int32](60)
	w.Spec.MaxDeletionsPerMinute = ptr.To[int32](noisyLimit)
	g.Expect(env.Client.Create(ctx, w)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), w) })
	left := func(ns string) func() (int, error) {
		return func() (int, error) {
			list := &batchv1.JobList{}
			err := env.Client.List(ctx, list, client.InNamespace(ns))
			n := 0
			for i := range list.Items {
				if list.Items[i].DeletionTimestamp.IsZero() {
					n++
				}
			}
			return n, err
		}
	}
	g.Eventually(left(other)).Should(BeZero(), "the other tenant's due Jobs")
	g.Eventually(func() ([]string, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(w), w)
		return w.Status.PausedNamespaces, err
	}).Should(Equal([]string{ns}))
	g.Eventually(left(ns)).Should(Equal(noisyJobs-noisyLimit), "the noisy tenant's Jobs left")
	t.Logf("a burst of %d due Jobs: %d deleted, the rest held in %s alone", noisyJobs, noisyLimit, ns)
}

// inParallel runs do(0) … do(n-1), eight at a time.
func inParallel(t *testing.T, n int, do func(int) error) {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				if err := do(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d: %v", len(errs), n, errs[0])
	}
}

// forgedReviews posts AdmissionReviews written by hand to the manager's
// webhook port, as a pod that reaches it could (the apiserver never sent
// them): a JobWatcher in namespace ns holding a regex bomb, in a review that
// says it is for namespace other, is refused naming metadata.namespace
// without compiling the bomb; a 16 MiB review is refused unread; 32 of them
// at once leave the manager under its limit (asserted by the caller).
func forgedReviews(t *testing.T, g Gomega, ns, other string) {
	t.Helper()
	opts := env.ManagerOptions()
	// A forger trusts nothing and needs to: the port speaks TLS to anyone.
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}}}
	url := fmt.Sprintf("https://%s/validate-batch-deckhand-dev-v1-jobwatcher", net.JoinHostPort(opts.WebhookHost, strconv.Itoa(opts.WebhookPort)))
	w := watcher(ns, "forged", []string{bomb}, nil)
	w.SetGroupVersionKind(deckhandbatchv1.GroupVersion.WithKind("JobWatcher"))
	raw, err := json.Marshal(w)
	g.Expect(err).NotTo(HaveOccurred())
	review := func(uid string) []byte {
		b, err := json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{UID: types.UID(uid), Kind: metav1.GroupVersionKind{Group: "batch.deckhand.dev", Version: "v1", Kind: "JobWatcher"},
				Resource:  metav1.GroupVersionResource{Group: "batch.deckhand.dev", Version: "v1", Resource: "jobwatchers"},
				Namespace: other, Name: "forged", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}},
		})
		g.Expect(err).NotTo(HaveOccurred())
		return b
	}
	post := func(body io.Reader) (int, []byte, error) {
		resp, err := c.Post(url, "application/json", body)
		if err != nil {
			return 0, nil, err
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, b, err
	}

	start := time.Now()
	code, body, err := post(bytes.NewReader(review("forged-1")))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(code).To(Equal(http.StatusOK), string(body))
	var got admissionv1.AdmissionReview
	g.Expect(json.Unmarshal(body, &got)).To(Succeed())
	g.Expect(got.Response).NotTo(BeNil())
	g.Expect(got.Response.Allowed).To(BeFalse(), "a review for another namespace was allowed")
	g.Expect(got.Response.Result.Message).To(ContainSubstring("metadata.namespace"))
	t.Logf("a forged review for another namespace: refused in %v: %s", time.Since(start).Round(time.Millisecond), got.Response.Result.Message)

	// 16 MiB: refused without being read whole (an errored review, or the
	// connection closed).
	code, body, err = post(io.LimitReader(zeros{}, 16<<20))
	if err == nil && code == http.StatusOK {
		var big admissionv1.AdmissionReview
		g.Expect(json.Unmarshal(body, &big)).To(Succeed(), string(body))
		g.Expect(big.Response).NotTo(BeNil())
		g.Expect(big.Response.Allowed).To(BeFalse(), "a 16 MiB review was allowed")
		g.Expect(big.Response.Result.Message).To(ContainSubstring("too large"))
		t.Logf("a 16 MiB review: refused: %s", big.Response.Result.Message)
	} else {
		t.Logf("a 16 MiB review: status %d, %v", code, err)
	}

	// 32 at once, each a forged review or a 16 MiB one.
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			if i%2 == 0 {
				_, _, _ = post(bytes.NewReader(review(fmt.Sprintf("forged-%d", i))))
			} else {
				_, _, _ = post(io.LimitReader(zeros{}, 16<<20))
			}
		})
	}
	wg.Wait()
}

// zeros reads as endless zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
