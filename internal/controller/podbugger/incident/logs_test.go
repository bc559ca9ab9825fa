package incident_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/incident"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/podbuggertest"
	"github.com/deckhand-dev/deckhand/internal/manager"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// startRecorder runs, for namespace ns only, the incident recorder alone,
// reading logs through logs (envtest has no kubelet to read them from). A
// manager serving the webhooks (and watching another namespace) runs too,
// so that PodBuggers are admitted.
func startRecorder(t *testing.T, ns string, logs incident.PodLogs) {
	t.Helper()
	opts := podbuggertest.Options(env)
	opts.WatchNamespaces = []string{"kube-system"}
	env.StartManager(t, opts)
	runRecorder(t, ns, logs)
}

// runRecorder runs the incident recorder alone for namespace ns until the
// test ends or stop is called (a manager that stops: its queued log reads
// are lost).
func runRecorder(t *testing.T, ns string, logs incident.PodLogs) (stop func()) {
	t.Helper()
	return runRecorderIn(t, []string{ns}, logs)
}

// runRecorderIn is runRecorder for several namespaces.
func runRecorderIn(t *testing.T, namespaces []string, logs incident.PodLogs) (stop func()) {
	t.Helper()
	return runRecorderWith(t, namespaces, logs, 0, nil)
}

// runRecorderWith is runRecorderIn with each PodBugger writing at most
// writesPerMinute records a minute (0: the default), reading the Secrets of
// failing pods' environments through secrets (nil: none).
func runRecorderWith(t *testing.T, namespaces []string, logs incident.PodLogs, writesPerMinute int,
	secrets client.Reader) (stop func()) {
	t.Helper()
	nss := map[string]cache.Config{}
	for _, ns := range namespaces {
		nss[ns] = cache.Config{}
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 manager.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: nss},
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := incident.NewIncidentReconciler(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetEventRecorder("podbugger"), logs, writesPerMinute,
		secrets)
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("the recorder's manager stopped with an error: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// TestASilentKubeletDelaysOnlyItsOwnLogs: pods crash at once on a node
// whose kubelet never answers a log read and on a healthy node whose
// kubelet answers late. Every failure is recorded at once (exit code,
// times, node), the records of the silent node's pods while their log reads
// still hang; the healthy node's records get their failed instance's log
// when its kubelet answers, the silent node's say why they have none.
// Reading the log before writing held the recorder's workers on the silent
// node's reads (3 s each) and every other pod's record behind them.
func TestASilentKubeletDelaysOnlyItsOwnLogs(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	var hanging atomic.Int32
	healthyAnswers := make(chan struct{})
	startRecorder(t, ns, func(ctx context.Context, _, pod, container string, previous bool, _ int) (string, bool, error) {
		if pod[:6] == "silent" {
			hanging.Add(1)
			defer hanging.Add(-1)
			<-ctx.Done()
			return "", false, ctx.Err()
		}
		select {
		case <-healthyAnswers:
		case <-ctx.Done():
			return "", false, ctx.Err()
		}
		return fmt.Sprintf("the log of %s/%s, previous=%t\n", pod, container, previous), false, nil
	})
	podbuggertest.Recorder(t, env, ns, []debugv1beta1.Trigger{debugv1beta1.TriggerCrashLoopBackOff}, nil)

	const perNode = 10
	pods := make([]*corev1.Pod, 0, 2*perNode)
	for _, node := range []string{"silent", "healthy"} {
		for i := range perNode {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", node, i), Labels: podbuggertest.Web},
				Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}
			env.Create(t, p)
			pods = append(pods, p)
		}
	}
	time.Sleep(time.Second) // the recorder has seen the pods
	t0 := time.Now().Add(-time.Second).Truncate(time.Second)
	for _, p := range pods { // the silent node's first: they take the workers first
		podbuggertest.Crash(t, env, p, 2, 1, t0, true)
	}
	crashed := time.Now()

	byPod := func() (map[string]debugv1beta1.PodIncident, error) {
		items, err := podbuggertest.IncidentsIn(env, ns)()
		out := map[string]debugv1beta1.PodIncident{}
		for _, i := range items {
			out[i.Spec.Pod.Name] = i
		}
		return out, err
	}
	g.Eventually(byPod).WithTimeout(2 * time.Second).WithPolling(50 * time.Millisecond).Should(HaveLen(2 * perNode))
	recorded := time.Since(crashed)
	recs, err := byPod()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hanging.Load()).To(BeNumerically(">", 0), "the silent node's log reads still hang when every record exists")
	for name, r := range recs {
		g.Expect(r.Spec.LastFailure).To(And(HaveField("ExitCode", int32(1)), HaveField("ContainerID", "containerd://instance-2")), name)
		g.Expect(r.Spec.Node).To(HaveField("Name", r.Spec.Pod.Name[:len(r.Spec.Pod.Name)-2]), name)
		g.Expect(r.Spec.LogTail).To(BeEmpty(), "%s: no log yet", name)
		g.Expect(r.Spec.LogError).To(ContainSubstring("being read"), name)
	}
	t.Logf("%d records %s after the crashes", len(recs), recorded.Round(time.Millisecond))

	close(healthyAnswers)
	g.Eventually(func(g Gomega) {
		recs, err := byPod()
		g.Expect(err).NotTo(HaveOccurred())
		for i := range perNode {
			h := recs[fmt.Sprintf("healthy-%d", i)]
			g.Expect(h.Spec.LogTail).To(Equal(fmt.Sprintf("the log of healthy-%d/app, previous=true\n", i)))
			g.Expect(h.Spec.LogError).To(BeEmpty())
			s := recs[fmt.Sprintf("silent-%d", i)]
			g.Expect(s.Spec.LogTail).To(BeEmpty())
			g.Expect(s.Spec.LogError).To(Or(ContainSubstring("deadline exceeded"), ContainSubstring("kubelet of node silent did not answer")))
			g.Expect(s.Spec.Count).To(Equal(int32(1)))
		}
	}).WithTimeout(15 * time.Second).Should(Succeed())
}

// TestALogLostInARestartIsReadByTheNextManager: a manager records a
// failure and stops before its kubelet answered the log read (a restart, a
// lost lease): the queued read goes with it. The next manager, seeing the
// record still waiting for the log of the pod's last failure, reads it and
// writes it into the same record, counted once; a record's log already
// written is not read again.
func TestALogLostInARestartIsReadByTheNextManager(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	opts := podbuggertest.Options(env)
	opts.WatchNamespaces = []string{"kube-system"}
	env.StartManager(t, opts)
	stop := runRecorder(t, ns, func(ctx context.Context, _, _, _ string, _ bool, _ int) (string, bool, error) {
		<-ctx.Done() // the kubelet has not answered when the manager stops
		return "", false, ctx.Err()
	})
	podbuggertest.Recorder(t, env, ns, []debugv1beta1.Trigger{debugv1beta1.TriggerCrashLoopBackOff}, nil)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app", Labels: podbuggertest.Web},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}
	env.Create(t, p)
	time.Sleep(time.Second) // the recorder has seen the pod
	podbuggertest.Crash(t, env, p, 2, 1, time.Now().Add(-time.Second).Truncate(time.Second), true)
	g.Eventually(podbuggertest.IncidentsIn(env, ns)).WithTimeout(10 * time.Second).Should(ConsistOf(
		HaveField("Spec.LogError", ContainSubstring("being read"))))
	stop()
	recs, err := podbuggertest.IncidentsIn(env, ns)()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(recs).To(ConsistOf(HaveField("Spec.LogError", ContainSubstring("being read"))), "the stopped manager wrote no log")

	var reads atomic.Int32
	runRecorder(t, ns, func(_ context.Context, _, pod, container string, previous bool, _ int) (string, bool, error) {
		reads.Add(1)
		return fmt.Sprintf("the log of %s/%s, previous=%t\n", pod, container, previous), false, nil
	})
	g.Eventually(podbuggertest.IncidentsIn(env, ns)).WithTimeout(15 * time.Second).Should(ConsistOf(And(
		HaveField("Spec.LogTail", "the log of app/app, previous=true\n"),
		HaveField("Spec.LogError", BeEmpty()),
		HaveField("Spec.Count", int32(1)),
		HaveField("Name", recs[0].Name))))
	// Another event of the pod finds the log written: nothing is read again.
	fresh := &corev1.Pod{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(p), fresh)).To(Succeed())
	fresh.Status.Conditions = append(fresh.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady"})
	g.Expect(env.Client.Status().Update(ctx, fresh)).To(Succeed())
	g.Consistently(reads.Load).WithTimeout(2 * time.Second).Should(Equal(int32(1)))
}

// A record keeps no credential a failing pod printed: its log tail, its
// termination message and its status message are redacted before the
// record is written (PodIncidents live in etcd, where encryption at rest
// usually covers only Secrets).
func TestARecordKeepsNoCredential(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	const token = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQifQ.c2lnbmF0dXJl"
	startRecorder(t, ns, func(context.Context, string, string, string, bool, int) (string, bool, error) {
		return "starting\nAuthorization: Bearer " + token + "\nDB_PASSWORD=hunter2hunter2\nno order for CUST-123456\nexit 1\n", false, nil
	})
	// The PodBugger's own pattern, for a secret of a shape only its owner
	// knows.
	podbuggertest.Recorder(t, env, ns, []debugv1beta1.Trigger{debugv1beta1.TriggerCrashLoopBackOff}, func(pb *debugv1beta1.PodBugger) {
		pb.Spec.Incidents = &debugv1beta1.IncidentPolicy{Redact: []string{`CUST-[0-9]{6}`}}
	})
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app", Labels: podbuggertest.Web},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}
	env.Create(t, p)
	time.Sleep(time.Second) // the recorder has seen the pod
	fresh := &corev1.Pod{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(p), fresh)).To(Succeed())
	fresh.Status.Message = "token " + token
	at := metav1.NewTime(time.Now().Add(-time.Second).Truncate(time.Second))
	fresh.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Image: "pause", ImageID: "pause", RestartCount: 1,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
			ContainerID: "containerd://instance-1", StartedAt: at, FinishedAt: at, Message: "login failed: password=hunter2hunter2 for CUST-654321"}}}}
	fresh.Status.Phase = corev1.PodRunning
	g.Expect(env.Client.Status().Update(ctx, fresh)).To(Succeed())
	g.Eventually(podbuggertest.IncidentsIn(env, ns)).WithTimeout(15 * time.Second).Should(ConsistOf(And(
		HaveField("Spec.LogTail", ContainSubstring("[REDACTED:")),
		HaveField("Spec.LogTail", And(Not(ContainSubstring(token)), Not(ContainSubstring("hunter2")), ContainSubstring("no order for [REDACTED:pattern]"))),
		HaveField("Spec.LastFailure.Message", And(Not(ContainSubstring("hunter2")), ContainSubstring("[REDACTED:"), ContainSubstring("for [REDACTED:pattern]"))),
		HaveField("Spec.Pod.Message", Not(ContainSubstring(token))))))
}

// A crash loop's record keeps its last five failed instances, oldest first,
// each with the log that instance left, read while the kubelet still held
// it: after seven crashes, instances 3 to 7, and no instance holds
// another's log.
func TestARecordKeepsTheLastInstancesEachWithItsOwnLog(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	startRecorder(t, ns, func(ctx context.Context, ns, pod, _ string, previous bool, _ int) (string, bool, error) {
		p := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pod}, p); err != nil {
			return "", false, err
		}
		cs := p.Status.ContainerStatuses[0]
		term := cs.State.Terminated
		if previous {
			term = cs.LastTerminationState.Terminated
		}
		return "the log of " + term.ContainerID + "\n", false, nil
	})
	podbuggertest.Recorder(t, env, ns, []debugv1beta1.Trigger{debugv1beta1.TriggerCrashLoopBackOff}, nil)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app", Labels: podbuggertest.Web},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}
	env.Create(t, p)
	time.Sleep(time.Second) // the recorder has seen the pod
	start := time.Now().Add(-time.Minute).Truncate(time.Second)
	for n := 1; n <= 7; n++ {
		podbuggertest.Crash(t, env, p, n, int32(n), start.Add(time.Duration(n)*time.Second), true)
		id := fmt.Sprintf("containerd://instance-%d", n)
		g.Eventually(podbuggertest.IncidentsIn(env, ns)).WithTimeout(15*time.Second).Should(ConsistOf(And(
			HaveField("Spec.Count", int32(n)),
			HaveField("Spec.Instances", HaveLen(min(n, 5))),
			HaveField("Spec.LogTail", "the log of "+id+"\n"))), "crash %d", n)
	}
	recs, err := podbuggertest.IncidentsIn(env, ns)()
	g.Expect(err).NotTo(HaveOccurred())
	instances := recs[0].Spec.Instances
	for i, in := range instances {
		id := fmt.Sprintf("containerd://instance-%d", i+3)
		g.Expect(in.ContainerID).To(Equal(id), "slot %d", i)
		g.Expect(in.ExitCode).To(BeEquivalentTo(i+3), "slot %d", i)
		g.Expect(in.LogTail).To(Equal("the log of "+id+"\n"), "slot %d holds another instance's log", i)
		g.Expect(in.LogError).To(BeEmpty())
	}
}

// TestAFirstInstanceRestartedBeforeItsLogIsReadKeepsItsOwnLog: the kubelet
// restarts a container's first failure at once and tells the apiserver
// about a second later, so a record's log may be read while the pod's
// status still shows the failed instance as current and the kubelet's
// current log is already the next instance's. Seen on the real node (the
// bench's incidents row: a record holding only the next instance's first
// line). The record keeps the failed instance's log, which the kubelet then
// serves as the previous one; a container not restarted keeps its current
// log.
func TestAFirstInstanceRestartedBeforeItsLogIsReadKeepsItsOwnLog(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	startRecorder(t, ns, func(_ context.Context, _, pod, _ string, previous bool, _ int) (string, bool, error) {
		switch {
		case pod == "restarted" && previous:
			return "the log of containerd://instance-1\n", false, nil
		case pod == "restarted":
			return "the log of the next instance\n", false, nil
		case previous:
			return "", false, fmt.Errorf("previous terminated container %q in pod %q not found", "app", pod)
		}
		return "the log of containerd://instance-1\n", false, nil
	})
	podbuggertest.Recorder(t, env, ns, []debugv1beta1.Trigger{debugv1beta1.TriggerError}, nil)
	finished := time.Now().Add(-time.Second).Truncate(time.Second)
	for _, name := range []string{"restarted", "stopped"} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: podbuggertest.Web},
			Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}
		env.Create(t, p)
		time.Sleep(time.Second) // the recorder has seen the pod
		podbuggertest.Crash(t, env, p, 1, 1, finished, false)
	}
	g.Eventually(podbuggertest.IncidentsIn(env, ns)).WithTimeout(15 * time.Second).Should(ConsistOf(
		And(HaveField("Spec.Pod.Name", "restarted"), HaveField("Spec.LogTail", "the log of containerd://instance-1\n")),
		And(HaveField("Spec.Pod.Name", "stopped"), HaveField("Spec.LogTail", "the log of containerd://instance-1\n"))))
}
