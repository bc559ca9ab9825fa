package incident_test

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/podbuggertest"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// TestIncidentsNeedNoOptInAndCountRepeats: a capture-only PodBugger in a
// namespace that never opted in records a crash as a PodIncident the user
// can read (pod, container, reason, exit code, bounded messages), counts the
// next crashes of the crash loop in the same record rather than a flood,
// counts no crash twice, and changes no pod.
func TestIncidentsNeedNoOptInAndCountRepeats(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t) // no debug.deckhand.dev/enabled label
	env.StartManager(t, podbuggertest.Options(env))
	web1 := runningPod(t, ns, "web-1", podbuggertest.Web)
	pb := podbuggertest.Recorder(t, env, ns, []debugv1beta1.Trigger{debugv1beta1.TriggerError, debugv1beta1.TriggerCrashLoopBackOff}, nil)
	g.Eventually(podbuggertest.Status(env, pb)).Should(podbuggertest.Condition(debugv1beta1.ConditionReady, metav1.ConditionTrue, debugv1beta1.ReasonCaptureOnly))

	t0 := time.Now().Add(-3 * time.Second).Truncate(time.Second)
	podbuggertest.Crash(t, env, web1, 1, 1, t0, false)
	g.Eventually(podbuggertest.IncidentsIn(env, ns)).Should(ConsistOf(And(
		HaveField("Spec.Pod.Name", "web-1"), HaveField("Spec.Container", "app"),
		HaveField("Spec.Reason", debugv1beta1.IncidentError), HaveField("Spec.Count", int32(1)),
		HaveField("Spec.LastFailure.ExitCode", int32(1)),
		HaveField("Spec.LastFailure.Message", HaveLen(debugv1beta1.MaxIncidentMessage)),
		HaveField("OwnerReferences", ConsistOf(HaveField("UID", pb.UID))))))
	g.Eventually(env.Events(ns, pb)).Should(ContainElement(HavePrefix("IncidentRecorded: Pod web-1 container app failed (Error, exit code 1)")))

	// The same crash seen again in CrashLoopBackOff is not counted twice;
	// the next crashes, in CrashLoopBackOff, are counted in one record of
	// that reason.
	podbuggertest.Crash(t, env, web1, 1, 1, t0, true)
	podbuggertest.Crash(t, env, web1, 2, 1, t0.Add(2*time.Second), true)
	podbuggertest.Crash(t, env, web1, 3, 1, t0.Add(4*time.Second), true)
	g.Eventually(podbuggertest.IncidentsIn(env, ns)).Should(ConsistOf(
		And(HaveField("Spec.Reason", debugv1beta1.IncidentError), HaveField("Spec.Count", int32(1))),
		And(HaveField("Spec.Reason", debugv1beta1.IncidentCrashLoopBackOff), HaveField("Spec.Count", int32(2)),
			HaveField("Spec.LastFailure.ContainerID", "containerd://instance-3"), HaveField("Spec.LastFailure.RestartCount", int32(2)),
			// Counted from the cache's slim copy, the record still holds
			// all it copied.
			HaveField("Spec.LastFailure.Message", HaveLen(debugv1beta1.MaxIncidentMessage)), HaveField("Spec.QOSClass", "BestEffort"))))
	g.Consistently(podbuggertest.IncidentsIn(env, ns)).Should(HaveLen(2))
	g.Expect(podbuggertest.Ephemeral(env, ns, "web-1")()).To(BeEmpty())
}

// TestIncidentsBoundedByCountAndAge: a PodBugger keeps at most maxRecords
// records, the latest failures, and none past maxAge.
func TestIncidentsBoundedByCountAndAge(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	env.StartManager(t, podbuggertest.Options(env))
	podbuggertest.Recorder(t, env, ns, []debugv1beta1.Trigger{debugv1beta1.TriggerError}, func(pb *debugv1beta1.PodBugger) {
		pb.Spec.Incidents = &debugv1beta1.IncidentPolicy{MaxRecords: 2, MaxAge: &metav1.Duration{Duration: time.Minute}}
	})
	now := time.Now().Truncate(time.Second)
	for i, age := range []time.Duration{50 * time.Second, 45 * time.Second, 42 * time.Second} {
		p := runningPod(t, ns, fmt.Sprintf("web-%d", i), podbuggertest.Web)
		podbuggertest.Crash(t, env, p, 1, 2, now.Add(-age), false)
		time.Sleep(200 * time.Millisecond)
	}
	names := func() ([]string, error) {
		items, err := podbuggertest.IncidentsIn(env, ns)()
		out := make([]string, 0, len(items))
		for _, i := range items {
			out = append(out, i.Spec.Pod.Name)
		}
		return out, err
	}
	// A crash older than maxAge is never recorded (it would be pruned at
	// once): a new PodBugger does not dig up a pod's ancient lastState.
	old := runningPod(t, ns, "web-old", podbuggertest.Web)
	podbuggertest.Crash(t, env, old, 1, 2, now.Add(-2*time.Minute), false)
	g.Eventually(names).Should(ConsistOf("web-1", "web-2"))
	g.Consistently(env.Events(ns, nil)).ShouldNot(ContainElement(ContainSubstring("web-old")))
	g.Eventually(names, 30*time.Second).Should(BeEmpty()) // both past maxAge by then
}

// TestIncidentInjectionReusesOneDebugContainer: with incidents.inject, a
// failing pod in an opted-in namespace gets the debug container once; its
// later failures reuse it (and their records hold its output's place).
func TestIncidentInjectionReusesOneDebugContainer(t *testing.T) {
	g := testenv.NewG(t)
	ns := podbuggertest.EnabledNamespace(t, env)
	env.StartManager(t, podbuggertest.Options(env))
	web1 := runningPod(t, ns, "web-1", podbuggertest.Web)
	runningPod(t, ns, "web-2", podbuggertest.Web) // never fails: never gets a container
	podbuggertest.Recorder(t, env, ns, []debugv1beta1.Trigger{debugv1beta1.TriggerError}, func(pb *debugv1beta1.PodBugger) {
		pb.Spec.Incidents = &debugv1beta1.IncidentPolicy{Inject: true}
	})
	t0 := time.Now().Add(-10 * time.Second).Truncate(time.Second)
	podbuggertest.Crash(t, env, web1, 1, 1, t0, false)
	g.Eventually(podbuggertest.Ephemeral(env, ns, "web-1")).Should(Equal([]string{"web-incidents"}))
	// A kubelet's backoff spaces crashes out; the test waits for each to
	// be counted before the next (the recorder reads a pod's latest status).
	for n := 2; n <= 4; n++ {
		podbuggertest.Crash(t, env, web1, n, 1, t0.Add(time.Duration(n)*time.Second), false)
		g.Eventually(podbuggertest.IncidentsIn(env, ns)).Should(ConsistOf(HaveField("Spec.Count", int32(n))))
	}
	g.Consistently(podbuggertest.Ephemeral(env, ns, "web-1")).Should(Equal([]string{"web-incidents"}))
	g.Expect(podbuggertest.Ephemeral(env, ns, "web-2")()).To(BeEmpty())
}

// TestIncidentsNotReadyAndEvicted: a pod not Ready beyond notReadyAfter and
// a pod evicted through the eviction API are recorded.
func TestIncidentsNotReadyAndEvicted(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	env.StartManager(t, podbuggertest.Options(env))
	podbuggertest.Recorder(t, env, ns, []debugv1beta1.Trigger{debugv1beta1.TriggerNotReady, debugv1beta1.TriggerEvicted}, func(pb *debugv1beta1.PodBugger) {
		pb.Spec.NotReadyAfter = &metav1.Duration{Duration: 10 * time.Second}
	})
	slow := runningPod(t, ns, "web-slow", podbuggertest.Web)
	slow.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse,
		LastTransitionTime: metav1.NewTime(time.Now().Add(-5 * time.Second))}}
	g.Expect(env.Client.Status().Update(ctx, slow)).To(Succeed())
	gone := runningPod(t, ns, "web-gone", podbuggertest.Web)
	gone.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: "EvictionByEvictionAPI", LastTransitionTime: metav1.Now()}}
	g.Expect(env.Client.Status().Update(ctx, gone)).To(Succeed())

	g.Eventually(podbuggertest.IncidentsIn(env, ns)).Should(ContainElement(And(HaveField("Spec.Pod.Name", "web-gone"), HaveField("Spec.Reason", debugv1beta1.IncidentEvicted))))
	g.Expect(podbuggertest.IncidentsIn(env, ns)()).NotTo(ContainElement(HaveField("Spec.Reason", debugv1beta1.IncidentNotReady)))
	g.Eventually(podbuggertest.IncidentsIn(env, ns), 15*time.Second).Should(ContainElement(And(HaveField("Spec.Pod.Name", "web-slow"), HaveField("Spec.Reason", debugv1beta1.IncidentNotReady))))
}

// TestSchemaValidatesTriggers: what a trigger needs is refused at admission,
// naming the field.
func TestSchemaValidatesTriggers(t *testing.T) {
	ns := env.Namespace(t)
	env.StartManager(t, podbuggertest.Options(env))
	tests := map[string]struct {
		change func(*debugv1beta1.PodBugger)
		want   string
	}{
		"capture only, no opt-in": {change: func(pb *debugv1beta1.PodBugger) { pb.Spec.Triggers = []debugv1beta1.Trigger{"OOMKilled"} }},
		"an unknown trigger": {change: func(pb *debugv1beta1.PodBugger) { pb.Spec.Triggers = []debugv1beta1.Trigger{"Crashed"} },
			want: `spec\.triggers\[0\]: Unsupported value: "Crashed"`},
		"notReadyAfter without NotReady": {change: func(pb *debugv1beta1.PodBugger) {
			pb.Spec.Triggers = []debugv1beta1.Trigger{"Error"}
			pb.Spec.NotReadyAfter = &metav1.Duration{Duration: time.Minute}
		}, want: `spec\.notReadyAfter: Invalid value: .*notReadyAfter needs the NotReady trigger`},
		"a short notReadyAfter": {change: func(pb *debugv1beta1.PodBugger) {
			pb.Spec.Triggers = []debugv1beta1.Trigger{"NotReady"}
			pb.Spec.NotReadyAfter = &metav1.Duration{Duration: time.Second}
		}, want: `spec\.notReadyAfter: Invalid value: .*between 10s and 24h`},
		"inject without a failure trigger": {change: func(pb *debugv1beta1.PodBugger) {
			pb.Spec.Incidents = &debugv1beta1.IncidentPolicy{Inject: true}
		}, want: `spec\.incidents\.inject: Invalid value: .*needs a failure trigger`},
		"too long a log tail": {change: func(pb *debugv1beta1.PodBugger) {
			pb.Spec.Triggers = []debugv1beta1.Trigger{"Error"}
			pb.Spec.Incidents = &debugv1beta1.IncidentPolicy{LogTailBytes: ptr.To[int32](1 << 20)}
		}, want: `spec\.incidents\.logTailBytes: Invalid value: 1048576: .*less than or equal to 16384`},
		"too many records": {change: func(pb *debugv1beta1.PodBugger) {
			pb.Spec.Triggers = []debugv1beta1.Trigger{"Error"}
			pb.Spec.Incidents = &debugv1beta1.IncidentPolicy{MaxRecords: 201}
		}, want: `spec\.incidents\.maxRecords: Invalid value: 201`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := testenv.NewG(t)
			pb := podbuggertest.PodBugger(ns, "", podbuggertest.Web)
			pb.GenerateName = "pb-"
			tc.change(pb)
			err := env.Client.Create(ctx, pb)
			if tc.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err).To(MatchError(MatchRegexp(tc.want)))
			}
		})
	}
}

// reconcileErrors is how many reconcile errors the incident recorder has
// returned in this process.
func reconcileErrors(t *testing.T) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_errors_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "podbugger-incidents" {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestAFailureAfterItsRecordWasPrunedOpensANewOne: a record deleted behind
// the recorder's back (pruned by maxRecords while failures turn records
// over, or by hand) is not where the next failure is counted: it opens a
// new record at once, without an error and a retry's backoff for each such
// failure (the crash loop bench logged 400 of them for 800 failures).
func TestAFailureAfterItsRecordWasPrunedOpensANewOne(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	env.StartManager(t, podbuggertest.Options(env))
	web1 := runningPod(t, ns, "web-1", podbuggertest.Web)
	pb := podbuggertest.Recorder(t, env, ns, []debugv1beta1.Trigger{debugv1beta1.TriggerCrashLoopBackOff}, nil)
	g.Eventually(podbuggertest.Status(env, pb)).Should(podbuggertest.Condition(debugv1beta1.ConditionReady, metav1.ConditionTrue, debugv1beta1.ReasonCaptureOnly))

	t0 := time.Now().Add(-3 * time.Second).Truncate(time.Second)
	podbuggertest.Crash(t, env, web1, 2, 1, t0, true)
	g.Eventually(podbuggertest.IncidentsIn(env, ns)).Should(HaveLen(1))
	first, err := podbuggertest.IncidentsIn(env, ns)()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Delete(ctx, &first[0])).To(Succeed())
	errorsBefore := reconcileErrors(t)

	podbuggertest.Crash(t, env, web1, 3, 1, t0.Add(2*time.Second), true)
	g.Eventually(podbuggertest.IncidentsIn(env, ns)).Should(ConsistOf(And(
		HaveField("Spec.Count", int32(1)), HaveField("Spec.LastFailure.ContainerID", "containerd://instance-3"))))
	g.Expect(reconcileErrors(t)-errorsBefore).To(BeZero(), "reconcile errors of the incident recorder")
}

// TestInitContainerFailuresAreRecorded: an init container that fails (the
// pod's containers wait for it) and a sidecar OOM-killed in a crash loop are
// recorded like a container's failures, each record saying which kind of
// container failed, with its resources.
func TestInitContainerFailuresAreRecorded(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	env.StartManager(t, podbuggertest.Options(env))
	podbuggertest.Recorder(t, env, ns, []debugv1beta1.Trigger{debugv1beta1.TriggerError, debugv1beta1.TriggerOOMKilled}, nil)
	limits := corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("16Mi")}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-init", Labels: podbuggertest.Web}, Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{
			{Name: "migrate", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{Limits: limits}},
			{Name: "proxy", Image: "registry.k8s.io/pause:3.10", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)},
		},
		Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
	}}
	env.Create(t, p)
	finished := metav1.NewTime(time.Now().Add(-2 * time.Second).Truncate(time.Second))
	p.Status.Phase = corev1.PodPending
	p.Status.InitContainerStatuses = []corev1.ContainerStatus{
		{Name: "migrate", Image: "pause", ImageID: "pause", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 3, Reason: "Error", ContainerID: "containerd://migrate-1", FinishedAt: finished}}},
		{Name: "proxy", Image: "pause", ImageID: "pause", RestartCount: 1,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 137, Reason: "OOMKilled", ContainerID: "containerd://proxy-1", FinishedAt: finished}}},
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Image: "pause", ImageID: "pause",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}
	g.Expect(env.Client.Status().Update(ctx, p)).To(Succeed())

	g.Eventually(podbuggertest.IncidentsIn(env, ns)).Should(ConsistOf(
		And(HaveField("Spec.Container", "migrate"), HaveField("Spec.ContainerKind", debugv1beta1.ContainerKindInit),
			HaveField("Spec.Reason", debugv1beta1.IncidentError), HaveField("Spec.LastFailure.ExitCode", int32(3)),
			HaveField("Spec.Resources.Limits", HaveKeyWithValue(corev1.ResourceMemory, resource.MustParse("16Mi")))),
		And(HaveField("Spec.Container", "proxy"), HaveField("Spec.ContainerKind", debugv1beta1.ContainerKindSidecar),
			HaveField("Spec.Reason", debugv1beta1.IncidentOOMKilled), HaveField("Spec.LastFailure.ContainerID", "containerd://proxy-1"))))
	g.Consistently(podbuggertest.IncidentsIn(env, ns)).Should(HaveLen(2))
}
