//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/notify/notifytest"
	"github.com/deckhand-dev/deckhand/test/cluster"
)

// On the real node, a PodBugger that only records (in a namespace that
// never opted in) catches a busybox exiting 1 every few seconds and one
// OOM-killed by a small memory limit, each record carrying the log of the
// instance that failed, not of the next one: every instance prints the time
// it started and the time it exits, and the record's log must show an exit
// time within a second of the kubelet's finishedAt for that instance (the
// next instance starts after a backoff of 10 s or more). A pod not Ready
// beyond notReadyAfter and one evicted through the eviction API are caught
// too. From finishedAt to the record created, the figures are logged (whole
// seconds on both sides); `make bench` measures them.
func TestRealNodePodBuggerRecordsIncidents(t *testing.T) {
	c.RealNode(t)
	g := rnG(t)
	ctx := context.Background()
	ns := c.RealNodeNamespace(t, nil) // no debug.deckhand.dev/enabled: recording needs none
	// Each record opened is told to a receiver on loopback, once.
	receiver := notifytest.NewReceiver(t)
	sinks := filepath.Join(t.TempDir(), "sinks.yaml")
	g.Expect(os.WriteFile(sinks, fmt.Appendf(nil, "sinks:\n- name: oncall\n  url: %s\n", receiver.URL), 0o600)).To(Succeed())
	c.RunManager(t, "--controllers", "podbugger", "--podbugger-allowed-images", "localhost/deckhand/busybox:*",
		"--podbugger-incident-sinks-file", sinks)

	pb := &debugv1beta1.PodBugger{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "catch"},
		Spec: debugv1beta1.PodBuggerSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "flaky"}},
			Image:    cluster.BusyboxImage,
			Triggers: []debugv1beta1.Trigger{debugv1beta1.TriggerError, debugv1beta1.TriggerOOMKilled,
				debugv1beta1.TriggerCrashLoopBackOff, debugv1beta1.TriggerNotReady, debugv1beta1.TriggerEvicted},
			NotReadyAfter: &metav1.Duration{Duration: 10 * time.Second},
			Incidents:     &debugv1beta1.IncidentPolicy{Notify: []string{"oncall"}},
		},
	}
	g.Eventually(func() error { return c.Client.Create(ctx, pb.DeepCopy()) }).WithTimeout(time.Minute).Should(Succeed())
	g.Eventually(pbStatus).WithArguments(pb).Should(WithTransform(pbReadyReason, Equal(debugv1beta1.ReasonCaptureOnly)))

	flaky := func(name string, change func(*corev1.Pod), command ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "flaky"}},
			Spec: restrictedSpec(command...)}
		if change != nil {
			change(p)
		}
		g.Expect(c.Client.Create(ctx, p)).To(Succeed())
		return p
	}
	flaky("crasher", nil, "sh", "-c", `echo "start $(date +%s)"; sleep 2; echo "exit $(date +%s)"; exit 1`)
	flaky("oom", func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("24Mi")}
	}, "sh", "-c", `echo "start $(date +%s)"; sleep 1; exec dd if=/dev/zero of=/dev/null bs=64M count=1`)
	flaky("unready", func(p *corev1.Pod) {
		p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1,
			ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"false"}}}}
	}, "sleep", "3600")
	// sh as PID 1 ignores SIGTERM: the evicted pod stays Terminating for
	// its grace period, as a real workload's would while it shuts down.
	evictee := flaky("evictee", func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30) },
		"sh", "-c", "echo serving; sleep 3600")

	// What ended each instance, as the record classes it: a signal (the
	// shell reports its child's SIGSEGV as 139), a child process killed for
	// the memory limit while the main process goes on (this node's cgroup
	// v1 kills the one process), and a liveness probe's kill.
	// ($$$$: the kubelet turns $$ into $ in a command.)
	flaky("segv", nil, "sh", "-c", `echo "start $(date +%s)"; sleep 1; sh -c 'kill -SEGV $$$$'; exit $?`)
	flaky("childoom", func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("24Mi")}
	}, "sh", "-c", `echo "start $(date +%s)"; sleep 1; dd if=/dev/zero of=/dev/null bs=64M count=1; echo "dd: $?"; exit 3`)
	flaky("liveness", func(p *corev1.Pod) {
		p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
		p.Spec.Containers[0].LivenessProbe = &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 1, InitialDelaySeconds: 2,
			ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"false"}}}}
	}, "sleep", "3600")

	// A value the pod's environment takes from a Secret, printed bare: its
	// record removes it, since the namespace's owner bound the manager the
	// shipped ClusterRole that lets it read that Secret.
	const canary = "Zq8-realnode-canary"
	g.Expect(c.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		StringData: map[string]string{"credential": canary}})).To(Succeed())
	g.Expect(c.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deckhand-podbugger-secret-env"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "deckhand-podbugger-secret-env"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: cluster.Namespace, Name: cluster.ServiceAccount}}})).To(Succeed())
	flaky("leaky", func(p *corev1.Pod) {
		p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "DB_CRED", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "credential"}}}}
	}, "sh", "-c", `echo "connecting as $DB_CRED to db"; sleep 1; exit 5`)

	// An init container that fails holds the pod back; the kubelet retries
	// it in its backoff.
	flaky("initfail", func(p *corev1.Pod) {
		ic := p.Spec.Containers[0]
		ic.Name, ic.Command = "migrate", []string{"sh", "-c", `echo "migrating $(date +%s)"; exit 4`}
		p.Spec.InitContainers = []corev1.Container{ic}
	}, "sleep", "3600")

	records := func() ([]debugv1beta1.PodIncident, error) {
		list := &debugv1beta1.PodIncidentList{}
		err := c.Client.List(ctx, list, client.InNamespace(ns))
		return list.Items, err
	}
	of := func(recs []debugv1beta1.PodIncident, pod string, reason debugv1beta1.IncidentReason) *debugv1beta1.PodIncident {
		i := slices.IndexFunc(recs, func(r debugv1beta1.PodIncident) bool { return r.Spec.Pod.Name == pod && r.Spec.Reason == reason })
		if i < 0 {
			return nil
		}
		return &recs[i]
	}
	// The liveness probe's kills: once one is recorded, told by the
	// kubelet's Killing Event, the pod goes, so that its crash loop does not
	// outrun the kubelet's Event spam filter (25 Events a pod, then one per
	// 5 minutes), past which a probe's kill has no Event to tell it by.
	g.Eventually(func(g Gomega) {
		recs, err := records()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(recs).To(ContainElement(And(HaveField("Spec.Pod.Name", "liveness"),
			HaveField("Spec.Instances", ContainElement(HaveField("Class", debugv1beta1.ClassProbeFailed))))))
	}).WithTimeout(2 * time.Minute).Should(Succeed())
	g.Expect(c.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "liveness"}})).To(Succeed())

	exitLine := regexp.MustCompile(`exit (\d+)\n`)
	// failedInstancesLog: the record's log ends with the exit line of the
	// instance in lastFailure.
	failedInstancesLog := func(g Gomega, r *debugv1beta1.PodIncident) {
		m := exitLine.FindAllStringSubmatch(r.Spec.LogTail, -1)
		g.Expect(m).NotTo(BeEmpty(), "log tail %q", r.Spec.LogTail)
		exited, _ := strconv.ParseInt(m[len(m)-1][1], 10, 64)
		g.Expect(exited).To(BeNumerically("~", r.Spec.LastFailure.FinishedAt.Unix(), 1),
			"the log %q is of the instance that finished at %s", r.Spec.LogTail, r.Spec.LastFailure.FinishedAt)
	}

	// The crash loop: its crashes are counted in at most two records (the
	// crashes the kubelet shows as terminated, Error, and those it shows in
	// CrashLoopBackOff; which ones it shows how depends on its timing),
	// each with the failed instance's log.
	var crashLoop debugv1beta1.PodIncident
	g.Eventually(func(g Gomega) {
		recs, err := records()
		g.Expect(err).NotTo(HaveOccurred())
		var counted int32
		for _, reason := range []debugv1beta1.IncidentReason{debugv1beta1.IncidentError, debugv1beta1.IncidentCrashLoopBackOff} {
			r := of(recs, "crasher", reason)
			if r == nil {
				continue
			}
			g.Expect(r.Spec.LastFailure).To(HaveField("ExitCode", int32(1)))
			failedInstancesLog(g, r)
			g.Expect(r.Spec.Node).To(HaveField("Name", "real-node"))
			counted += r.Spec.Count
			if r.Spec.Count > crashLoop.Spec.Count {
				crashLoop = *r
			}
		}
		g.Expect(counted).To(BeNumerically(">=", 3))
		g.Expect(crashLoop.Spec.Count).To(BeNumerically(">=", 2))
	}).WithTimeout(3 * time.Minute).Should(Succeed())
	t.Logf("crash loop record after %d crashes: restartCount %d, log tail %q",
		crashLoop.Spec.Count, crashLoop.Spec.LastFailure.RestartCount, crashLoop.Spec.LogTail)

	// Each instance the record keeps holds the log of that instance: its
	// "exit" line is its own finishedAt (or it says why it has none), and
	// no two share a container ID.
	g.Eventually(func(g Gomega) {
		recs, err := records()
		g.Expect(err).NotTo(HaveOccurred())
		r := of(recs, "crasher", crashLoop.Spec.Reason)
		g.Expect(r).NotTo(BeNil())
		g.Expect(r.Spec.Instances).To(HaveLen(min(int(r.Spec.Count), 5)))
		ids := map[string]bool{}
		for _, in := range r.Spec.Instances {
			g.Expect(ids).NotTo(HaveKey(in.ContainerID))
			ids[in.ContainerID] = true
			if in.LogError != "" {
				continue
			}
			m := exitLine.FindAllStringSubmatch(in.LogTail, -1)
			g.Expect(m).NotTo(BeEmpty(), "instance %s: log tail %q", in.ContainerID, in.LogTail)
			exited, _ := strconv.ParseInt(m[len(m)-1][1], 10, 64)
			g.Expect(exited).To(BeNumerically("~", in.FinishedAt.Unix(), 1),
				"instance %s: the log %q is of the instance that finished at %s", in.ContainerID, in.LogTail, in.FinishedAt)
		}
		crashLoop = *r
	}).WithTimeout(time.Minute).Should(Succeed())
	for _, in := range crashLoop.Spec.Instances {
		t.Logf("instance %s (restart %d) finished %s: log %q, logError %q", in.ContainerID, in.RestartCount, in.FinishedAt, in.LogTail, in.LogError)
	}

	// The OOM kill: exit code 137, the limit and the pod's QoS in the record.
	g.Eventually(func(g Gomega) {
		recs, err := records()
		g.Expect(err).NotTo(HaveOccurred())
		oom := of(recs, "oom", debugv1beta1.IncidentOOMKilled)
		g.Expect(oom).NotTo(BeNil())
		g.Expect(oom.Spec.LastFailure).To(And(HaveField("ExitCode", int32(137)), HaveField("Reason", "OOMKilled")))
		m := regexp.MustCompile(`start (\d+)\n`).FindAllStringSubmatch(oom.Spec.LogTail, -1)
		g.Expect(m).NotTo(BeEmpty(), "log tail %q", oom.Spec.LogTail)
		started, _ := strconv.ParseInt(m[len(m)-1][1], 10, 64)
		g.Expect(started).To(BeNumerically("~", oom.Spec.LastFailure.StartedAt.Unix(), 1),
			"the log %q is of the instance started at %s", oom.Spec.LogTail, oom.Spec.LastFailure.StartedAt)
		g.Expect(oom.Spec.Resources.Limits.Memory().String()).To(Equal("24Mi"))
		g.Expect(oom.Spec.QOSClass).To(Equal("Burstable"))
	}).Should(Succeed())

	// The init container's failure, with its kind and its log.
	g.Eventually(func(g Gomega) {
		recs, err := records()
		g.Expect(err).NotTo(HaveOccurred())
		r := of(recs, "initfail", debugv1beta1.IncidentError)
		if r == nil {
			r = of(recs, "initfail", debugv1beta1.IncidentCrashLoopBackOff)
		}
		g.Expect(r).NotTo(BeNil())
		g.Expect(r.Spec).To(And(HaveField("Container", "migrate"), HaveField("ContainerKind", debugv1beta1.ContainerKindInit),
			HaveField("LastFailure.ExitCode", int32(4))))
		g.Expect(r.Spec.LogTail).To(MatchRegexp(`^migrating \d+\n$`))
	}).Should(Succeed())

	// The Secret's value is gone from the record, however it was printed.
	g.Eventually(func(g Gomega) {
		recs, err := records()
		g.Expect(err).NotTo(HaveOccurred())
		r := of(recs, "leaky", debugv1beta1.IncidentError)
		if r == nil {
			r = of(recs, "leaky", debugv1beta1.IncidentCrashLoopBackOff)
		}
		g.Expect(r).NotTo(BeNil())
		g.Expect(r.Spec.LogTail).To(Equal("connecting as [REDACTED:secret-env] to db\n"))
		for _, in := range r.Spec.Instances {
			g.Expect(in.LogTail).NotTo(ContainSubstring(canary))
		}
	}).Should(Succeed())

	// Not Ready beyond notReadyAfter.
	g.Eventually(func(g Gomega) {
		recs, err := records()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(of(recs, "unready", debugv1beta1.IncidentNotReady)).To(HaveField("Spec.Container", "main"))
	}).Should(Succeed())

	// Each failure is classed as it was caused: every record of a pod says
	// the class its program was made to fail with.
	classes := map[string]debugv1beta1.IncidentClass{
		"crasher": debugv1beta1.ClassExitCode, "oom": debugv1beta1.ClassOOMKilled, "childoom": debugv1beta1.ClassOOMKilledChild,
		"segv": debugv1beta1.ClassSignal, "liveness": debugv1beta1.ClassProbeFailed, "initfail": debugv1beta1.ClassExitCode,
		"unready": debugv1beta1.ClassNotReady,
	}
	g.Eventually(func(g Gomega) {
		recs, err := records()
		g.Expect(err).NotTo(HaveOccurred())
		expectClasses(g, recs, classes)
	}).WithTimeout(2 * time.Minute).Should(Succeed())

	// Evicted through the eviction API, the record is written while the pod
	// shuts down, with its log.
	g.Eventually(func(g Gomega) { runningOnRealNode(g, c.RealNode(t), ns, "evictee") }).Should(Succeed())
	g.Expect(c.Client.SubResource("eviction").Create(ctx, evictee,
		&policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "evictee"}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		recs, err := records()
		g.Expect(err).NotTo(HaveOccurred())
		r := of(recs, "evictee", debugv1beta1.IncidentEvicted)
		g.Expect(r).NotTo(BeNil())
		g.Expect(r.Spec.LogTail).To(Equal("serving\n"))
		g.Expect(r.Spec.Class).To(Equal(debugv1beta1.ClassEvictionAPI))
	}).Should(Succeed())

	// Every record opened was told once, under its own key, however many
	// failures it counts; none is closed yet (10 minutes of quiet).
	g.Eventually(func(g Gomega) {
		recs, err := records()
		g.Expect(err).NotTo(HaveOccurred())
		opened := map[string]int{}
		for _, r := range recs {
			opened[string(r.UID)+"/opened"] = 1
		}
		g.Expect(receiver.Times()).To(Equal(opened))
	}).Should(Succeed())
	g.Consistently(receiver.Times, "5s").Should(HaveEach(1))
	m := receiver.Last(string(crashLoop.UID) + "/opened")
	g.Expect(m).To(And(HaveField("Type", "opened"), HaveField("Namespace", ns), HaveField("Source", "catch"),
		HaveField("Pod", "crasher"), HaveField("Record", crashLoop.Name), HaveField("Reason", string(crashLoop.Spec.Reason))))
	t.Logf("notification of %s: %+v", crashLoop.Name, m)

	// From the kubelet's finishedAt of each record's first failure to its
	// creation (both in whole seconds).
	recs, err := records()
	g.Expect(err).NotTo(HaveOccurred())
	for _, r := range recs {
		if r.Spec.LastFailure == nil {
			continue
		}
		t.Logf("PodIncident %s (%s): first finishedAt %s, created %s: %s", r.Name, r.Spec.Reason,
			r.Spec.FirstTime.Format(time.RFC3339), r.CreationTimestamp.Format(time.RFC3339),
			r.CreationTimestamp.Sub(r.Spec.FirstTime.Time))
	}
	out, err := c.Kubectl("get", "podincidents", "-n", ns)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("kubectl get podincidents:\n%s", out)
	out, err = c.Kubectl("describe", "podincident", "-n", ns, crashLoop.Name)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("kubectl describe podincident:\n%s", out)
}

// With incidents.inject, in an opted-in namespace, a crash-looping pod on
// the real node gets the debug container once, at its first incident; the
// later records hold the container's output, and however often the pod
// crashes again it keeps that one container.
func TestRealNodeIncidentsReuseOneDebugContainer(t *testing.T) {
	c.RealNode(t)
	g := rnG(t)
	ctx := context.Background()
	ns := c.RealNodeNamespace(t, map[string]string{debugv1beta1.NamespaceEnabledLabel: "true"})
	c.RunManager(t, "--controllers", "podbugger", "--podbugger-allowed-images", "localhost/deckhand/busybox:*")

	pb := &debugv1beta1.PodBugger{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"},
		Spec: debugv1beta1.PodBuggerSpec{
			Selector:  metav1.LabelSelector{MatchLabels: map[string]string{"app": "flaky"}},
			Image:     cluster.BusyboxImage,
			Command:   []string{"sh", "-c", `echo "debugger saw: $(ls /proc | grep -c '^[0-9]') processes"; sleep 3600`},
			Triggers:  []debugv1beta1.Trigger{debugv1beta1.TriggerError, debugv1beta1.TriggerCrashLoopBackOff},
			Incidents: &debugv1beta1.IncidentPolicy{Inject: true},
		},
	}
	g.Eventually(func() error { return c.Client.Create(ctx, pb.DeepCopy()) }).WithTimeout(time.Minute).Should(Succeed())
	crasher := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "crasher", Labels: map[string]string{"app": "flaky"}},
		Spec: restrictedSpec("sh", "-c", `echo "start $(date +%s)"; sleep 2; exit 3`)}
	g.Expect(c.Client.Create(ctx, crasher)).To(Succeed())

	ephemeral := func() ([]string, error) {
		got := &corev1.Pod{}
		err := c.Client.Get(ctx, client.ObjectKeyFromObject(crasher), got)
		names := make([]string, 0, len(got.Spec.EphemeralContainers))
		for _, e := range got.Spec.EphemeralContainers {
			names = append(names, e.Name)
		}
		return names, err
	}
	g.Eventually(ephemeral).Should(Equal([]string{"probe"}))
	g.Eventually(func(g Gomega) {
		list := &debugv1beta1.PodIncidentList{}
		g.Expect(c.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		var withOutput int32
		for _, r := range list.Items {
			if r.Spec.DebugContainer != nil {
				g.Expect(r.Spec.DebugContainer).To(HaveField("Name", "probe"))
				g.Expect(r.Spec.DebugContainer.LogTail).To(MatchRegexp(`debugger saw: \d+ processes`))
				withOutput += r.Spec.Count
			}
			g.Expect(r.Spec.LastFailure).To(HaveField("ExitCode", int32(3)))
		}
		g.Expect(withOutput).To(BeNumerically(">=", 2))
	}).WithTimeout(3 * time.Minute).Should(Succeed())
	g.Expect(ephemeral()).To(Equal([]string{"probe"}), "one debug container, however often the pod failed")
	g.Eventually(pbStatus).WithArguments(pb).Should(HaveField("Installed", int32(1)))
}

// With incidents.artifacts, a crash-looping pod that writes a dump into an
// emptyDir before it exits gets the collector at its first failure, and
// each record's instance lists the files that instance wrote, with the
// size and SHA-256 of their known content, copied into the volume's
// .deckhand directory where the next crash does not overwrite them.
func TestRealNodeIncidentArtifactsAreListedAndKept(t *testing.T) {
	c.RealNode(t)
	g := rnG(t)
	ns := c.RealNodeNamespace(t, map[string]string{debugv1beta1.NamespaceEnabledLabel: "true"})
	listed := crashWithDumps(t, g, ns, corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}})
	// The copy is in the volume, as hashed.
	out, err := c.Kubectl("exec", "-n", ns, "dumper", "-c", "dumps", "--", "sha256sum", "/deckhand-artifacts/"+listed.Artifacts[0].Copy)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(HavePrefix(listed.Artifacts[0].SHA256))
}

// Dumps that must outlive their pod go to a PersistentVolumeClaim the pod
// mounts: the collector copies them into the claim, and once the pod is
// deleted the copy is still on the volume, as its record hashed it. (An
// ephemeral container can mount only the pod's own volumes.) The volume is
// a directory of the real node's host, bound to the claim by hand: the
// real node has no storage provisioner. A claim bound to a hostPath volume
// reaches into its node, which PodBuggers skip unless the operator allows
// host access, as this test's manager does.
func TestRealNodeIncidentArtifactsInAClaimOutliveTheirPod(t *testing.T) {
	c.RealNode(t)
	g := rnG(t)
	ctx := context.Background()
	ns := c.RealNodeNamespace(t, map[string]string{debugv1beta1.NamespaceEnabledLabel: "true"})
	dir := t.TempDir()
	g.Expect(os.Chmod(dir, 0o777)).To(Succeed()) // the pod's user and the debug container's write it
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: ns + "-dumps"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "",
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: "dumps"},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}},
		}}
	g.Expect(c.Client.Create(ctx, pv)).To(Succeed())
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), pv) })
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dumps"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(""),
			VolumeName:       pv.Name,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}},
		}}
	g.Expect(c.Client.Create(ctx, pvc)).To(Succeed())

	listed := crashWithDumps(t, g, ns, corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "dumps"}},
		"--podbugger-allow-host-access")
	g.Expect(c.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dumper"}},
		client.GracePeriodSeconds(0))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dumper"}, &corev1.Pod{}))
	}).WithTimeout(time.Minute).Should(BeTrue())
	for _, f := range listed.Artifacts {
		kept, err := os.ReadFile(filepath.Join(dir, f.Copy))
		g.Expect(err).NotTo(HaveOccurred(), "%s's copy after its pod was deleted", f.Name)
		sum := sha256.Sum256(kept)
		g.Expect(hex.EncodeToString(sum[:])).To(Equal(f.SHA256), "%s's copy as its record hashed it", f.Name)
	}
}

// crashWithDumps runs, in ns, a PodBugger collecting the artifacts of the
// volume "dumps" and a pod with that volume (from source) that writes a
// 25-byte core.dump and a 3 KiB heap.bin into it and exits 1, over and
// over; and waits until two records' instances list those files, each
// with its size, its SHA-256 (heap.bin's cut to maxFileBytes) and its copy.
// It returns the last instance listed. The manager runs with flags added.
func crashWithDumps(t *testing.T, g Gomega, ns string, source corev1.VolumeSource, flags ...string) debugv1beta1.IncidentInstance {
	t.Helper()
	ctx := context.Background()
	c.RunManager(t, append([]string{"--controllers", "podbugger", "--podbugger-allowed-images", "localhost/deckhand/busybox:*"}, flags...)...)
	pb := &debugv1beta1.PodBugger{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dumps"},
		Spec: debugv1beta1.PodBuggerSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "dumper"}},
			Image:    cluster.BusyboxImage,
			Triggers: []debugv1beta1.Trigger{debugv1beta1.TriggerError, debugv1beta1.TriggerCrashLoopBackOff},
			Incidents: &debugv1beta1.IncidentPolicy{Inject: true, Artifacts: &debugv1beta1.IncidentArtifacts{
				Volume: "dumps", MaxFileBytes: ptr.To[int64](2048), Keep: ptr.To[int32](2)}},
		},
	}
	g.Eventually(func() error { return c.Client.Create(ctx, pb.DeepCopy()) }).WithTimeout(time.Minute).Should(Succeed())
	const dump = "deckhand dump of a crash\n"
	dumper := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dumper", Labels: map[string]string{"app": "dumper"}},
		Spec: restrictedSpec("sh", "-c", `printf 'deckhand dump of a crash\n' >/dumps/core.dump; `+
			`dd if=/dev/zero of=/dumps/heap.bin bs=1024 count=3 2>/dev/null; sleep 1; exit 1`)}
	dumper.Spec.Volumes = []corev1.Volume{{Name: "dumps", VolumeSource: source}}
	dumper.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "dumps", MountPath: "/dumps"}}
	g.Expect(c.Client.Create(ctx, dumper)).To(Succeed())

	core := sha256.Sum256([]byte(dump))
	heap := sha256.Sum256(make([]byte, 2048)) // cut to maxFileBytes
	var listed debugv1beta1.IncidentInstance
	g.Eventually(func(g Gomega) {
		list := &debugv1beta1.PodIncidentList{}
		g.Expect(c.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		n := 0
		for _, r := range list.Items {
			for _, in := range r.Spec.Instances {
				if len(in.Artifacts) == 0 {
					continue
				}
				g.Expect(in.Artifacts).To(ConsistOf(
					And(HaveField("Name", "core.dump"), HaveField("Size", int64(len(dump))),
						HaveField("SHA256", hex.EncodeToString(core[:])), HaveField("Truncated", false),
						HaveField("Copy", MatchRegexp(`^\.deckhand/\d+/core\.dump$`))),
					And(HaveField("Name", "heap.bin"), HaveField("Size", int64(3072)),
						HaveField("SHA256", hex.EncodeToString(heap[:])), HaveField("Truncated", true))),
					"instance %s", in.ContainerID)
				listed = in
				n++
			}
		}
		g.Expect(n).To(BeNumerically(">=", 2), "two instances, each with its own files")
	}).WithTimeout(3 * time.Minute).Should(Succeed())
	t.Logf("instance %s (restart %d, finished %s) lists %+v", listed.ContainerID, listed.RestartCount,
		listed.FinishedAt.UTC().Format(time.RFC3339), listed.Artifacts)
	return listed
}

// The kubelet evicts a pod that writes past its ephemeral-storage limit
// (here into an emptyDir; the real node's kubelet enforces the limit though
// its evictionHard is empty), and a PodBugger with the Evicted trigger
// records it with the kubelet's message and Event.
func TestRealNodeKubeletEvictionIsRecorded(t *testing.T) {
	c.RealNode(t)
	g := rnG(t)
	ctx := context.Background()
	ns := c.RealNodeNamespace(t, nil)
	c.RunManager(t, "--controllers", "podbugger", "--podbugger-allowed-images", "localhost/deckhand/busybox:*")
	pb := &debugv1beta1.PodBugger{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "catch"},
		Spec: debugv1beta1.PodBuggerSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "hog"}},
			Image:    cluster.BusyboxImage,
			Triggers: []debugv1beta1.Trigger{debugv1beta1.TriggerEvicted},
		},
	}
	g.Eventually(func() error { return c.Client.Create(ctx, pb.DeepCopy()) }).WithTimeout(time.Minute).Should(Succeed())
	hog := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hog", Labels: map[string]string{"app": "hog"}},
		Spec: restrictedSpec("sh", "-c", "echo filling; dd if=/dev/zero of=/scratch/fill bs=1M count=32; echo filled; sleep 3600")}
	hog.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	hog.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	hog.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("8Mi")}
	g.Expect(c.Client.Create(ctx, hog)).To(Succeed())

	g.Eventually(func(g Gomega) {
		list := &debugv1beta1.PodIncidentList{}
		g.Expect(c.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(ContainElement(And(HaveField("Spec.Pod.Name", "hog"), HaveField("Spec.Reason", debugv1beta1.IncidentEvicted),
			HaveField("Spec.Pod.Message", ContainSubstring("ephemeral local storage")),
			HaveField("Spec.Events", ContainElement(HaveField("Reason", "Evicted"))),
			// The kubelet removes an evicted pod's log at once: the record
			// has its log or says it is gone, never the kubelet's error
			// as if the container had printed it.
			Or(HaveField("Spec.LogTail", HavePrefix("filling\n")),
				And(HaveField("Spec.LogTail", BeEmpty()), HaveField("Spec.LogError", ContainSubstring("the kubelet has removed the container's log")))))))
	}).WithTimeout(4 * time.Minute).Should(Succeed())
	out, err := c.Kubectl("get", "podincidents", "-n", ns, "-o", "yaml")
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("the eviction's record:\n%s", out)
}

// expectClasses checks that every record of each pod of classes (its
// NotReady records only for "unready", which fails no other way) says the
// pod's class, in each instance too, and that a SIGSEGV is named.
func expectClasses(g Gomega, recs []debugv1beta1.PodIncident, classes map[string]debugv1beta1.IncidentClass) {
	for pod, want := range classes {
		var found bool
		for _, r := range recs {
			if r.Spec.Pod.Name != pod || (pod == "unready") != (r.Spec.Reason == debugv1beta1.IncidentNotReady) {
				continue
			}
			found = true
			if pod == "liveness" {
				expectProbeKills(g, r)
				continue
			}
			g.Expect(r.Spec.Class).To(Equal(want), "%s: %s (%+v)", pod, r.Name, r.Spec.LastFailure)
			for _, in := range r.Spec.Instances {
				g.Expect(in.Class).To(Equal(want), "%s: instance %s", pod, in.ContainerID)
			}
			if pod == "segv" && r.Spec.LastFailure != nil {
				g.Expect(r.Spec.LastFailure.Explanation).To(ContainSubstring("SIGSEGV"))
			}
		}
		g.Expect(found).To(BeTrue(), "no record of %s", pod)
	}
}

// expectProbeKills checks the record of a container its liveness probe
// killed: its instances are ProbeFailed, told by the kubelet's Killing
// Events. An instance whose Event the kubelet's spam filter dropped (a long
// crash loop's) is what its status says, a SIGKILL (Signal): never another
// class.
func expectProbeKills(g Gomega, r debugv1beta1.PodIncident) {
	g.Expect(r.Spec.Instances).To(ContainElement(HaveField("Class", debugv1beta1.ClassProbeFailed)), "liveness: %s", r.Name)
	for _, in := range r.Spec.Instances {
		g.Expect(in.Class).To(BeElementOf(debugv1beta1.ClassProbeFailed, debugv1beta1.ClassSignal), "liveness: instance %s", in.ContainerID)
		if in.Class == debugv1beta1.ClassSignal {
			g.Expect(in.Explanation).To(ContainSubstring("SIGKILL"), "liveness: instance %s", in.ContainerID)
		}
	}
}
