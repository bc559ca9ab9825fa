package gitops

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

var (
	env *testenv.Env
	ctx = context.Background()
)

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// startManager runs every controller, allowing busybox debug images.
func startManager(t *testing.T) {
	o := env.ManagerOptions()
	o.PodBuggerAllowedImages = []string{"docker.io/library/busybox:*"}
	env.StartManager(t, o)
}

// judgedAs waits until every GitOps tool reads obj as want, and checks
// that its conditions say which generation they judged.
func judgedAs(t *testing.T, obj client.Object, want verdict, conditions func() ([]metav1.Condition, int64)) {
	t.Helper()
	g := testenv.NewG(t)
	var got verdict
	g.Eventually(func() (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, err
		}
		got = judge(t, obj)
		return got.same(want), nil
	}).Should(BeTrue(), func() string { return "got " + got.String() + ", want " + want.String() })
	conds, observed := conditions()
	conditionGenerations(t, conds, observed)
}

// edited checks that, right after a spec change (the apiserver has raised
// the generation, no controller has seen it yet), every tool reads obj as
// progressing, whatever its status said of the generation before.
func edited(t *testing.T, obj client.Object) {
	t.Helper()
	next := obj.DeepCopyObject().(client.Object)
	next.SetGeneration(obj.GetGeneration() + 1)
	if got := judge(t, next); !got.same(progressing) {
		t.Errorf("a spec change no controller has seen yet: got %v, want %v", got, progressing)
	}
}

func TestPodSetHealth(t *testing.T) {
	g := testenv.NewG(t)
	startManager(t)
	ns := env.Namespace(t)
	set := &appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1beta1.PodSetSpec{
		Replicas: 2, Template: ptr.To(podTemplate())}}
	g.Expect(env.Client.Create(ctx, set)).To(Succeed())
	conds := func() ([]metav1.Condition, int64) { return set.Status.Conditions, set.Status.ObservedGeneration }

	// Its pods exist, none is Ready: progressing.
	judgedAs(t, set, progressing, conds)
	// The kubelet reports them Ready: healthy.
	pods := &corev1.PodList{}
	g.Eventually(func() (int, error) {
		err := env.Client.List(ctx, pods, client.InNamespace(ns))
		return len(pods.Items), err
	}).Should(Equal(2))
	for i := range pods.Items {
		markReady(t, &pods.Items[i])
	}
	judgedAs(t, set, healthy, conds)

	// A quota refuses the pods of a scale-up: degraded, with the reason.
	quota(t, ns, "2")
	g.Expect(env.Update(set, func() { set.Spec.Replicas = 4 })).To(Succeed())
	judgedAs(t, set, degraded, conds)

	edited(t, set)
}

func TestModelBoxHealth(t *testing.T) {
	g := testenv.NewG(t)
	startManager(t)
	ns := env.Namespace(t)
	box := &modelv1.ModelBox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "llm"}, Spec: modelv1.ModelBoxSpec{
		Image: "docker.io/library/busybox:1.37", Replicas: ptr.To[int32](1)}}
	g.Expect(env.Client.Create(ctx, box)).To(Succeed())
	conds := func() ([]metav1.Condition, int64) { return box.Status.Conditions, box.Status.ObservedGeneration }

	// Its Deployment exists, nothing is available: progressing.
	judgedAs(t, box, progressing, conds)
	// The Deployment controller reports it rolled out: healthy.
	d := &appsv1.Deployment{}
	g.Eventually(func() error { return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "llm"}, d) }).Should(Succeed())
	deploymentStatus(t, d, appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"})
	judgedAs(t, box, healthy, conds)
	// Its rollout passed the progress deadline: degraded.
	deploymentStatus(t, d, appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded",
		Message: `ReplicaSet "llm-1" has timed out progressing.`})
	judgedAs(t, box, degraded, conds)

	edited(t, box)
}

func TestJobWatcherHealth(t *testing.T) {
	g := testenv.NewG(t)
	startManager(t)
	ns := env.Namespace(t)
	jw := &deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cleanup"}, Spec: deckhandbatchv1.JobWatcherSpec{
		JobPolicy: deckhandbatchv1.JobPolicy{TTLSecondsAfterSucceeded: ptr.To[int32](0), MaxDeletionsPerMinute: ptr.To[int32](1)}}}
	g.Expect(env.Client.Create(ctx, jw)).To(Succeed())
	conds := func() ([]metav1.Condition, int64) { return jw.Status.Conditions, jw.Status.ObservedGeneration }
	judgedAs(t, jw, healthy, conds)

	g.Expect(env.Update(jw, func() { jw.Spec.Suspend = true })).To(Succeed())
	judgedAs(t, jw, suspended, conds)

	// More Jobs due than its limit allows: it stops deleting until its
	// owner says so, which no controller can do for them.
	g.Expect(env.Update(jw, func() { jw.Spec.Suspend = false })).To(Succeed())
	for _, name := range []string{"a", "b", "c"} {
		finishedJob(t, ns, name)
	}
	judgedAs(t, jw, degraded, conds)

	edited(t, jw)
}

func TestClusterJobWatcherHealth(t *testing.T) {
	g := testenv.NewG(t)
	startManager(t)
	ns := env.Namespace(t)
	cjw := &deckhandbatchv1.ClusterJobWatcher{ObjectMeta: metav1.ObjectMeta{Name: "cleanup-" + ns}, Spec: deckhandbatchv1.ClusterJobWatcherSpec{
		NamespacePatterns: []string{ns}, JobPolicy: deckhandbatchv1.JobPolicy{TTLSecondsAfterSucceeded: ptr.To[int32](60)}}}
	g.Expect(env.Client.Create(ctx, cjw)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, cjw) })
	judgedAs(t, cjw, healthy, func() ([]metav1.Condition, int64) { return cjw.Status.Conditions, cjw.Status.ObservedGeneration })
}

func TestPodBuggerHealth(t *testing.T) {
	g := testenv.NewG(t)
	startManager(t)
	ns := env.NamespaceWithLabels(t, map[string]string{debugv1beta1.NamespaceEnabledLabel: "true"})
	pb := &debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dbg"}, Spec: debugv1beta1.PodBuggerSpec{
		Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Image: "docker.io/library/busybox:1.37"}}
	g.Expect(env.Client.Create(ctx, pb)).To(Succeed())
	conds := func() ([]metav1.Condition, int64) { return pb.Status.Conditions, pb.Status.ObservedGeneration }
	judgedAs(t, pb, healthy, conds)

	// The namespace opts out: the PodBugger cannot act until an
	// administrator opts it in again.
	optIn := func(label string) {
		nsObj := &corev1.Namespace{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: ns}, nsObj)).To(Succeed())
		g.Expect(env.Update(nsObj, func() { nsObj.Labels[debugv1beta1.NamespaceEnabledLabel] = label })).To(Succeed())
	}
	optIn("false")
	judgedAs(t, pb, degraded, conds)
	optIn("true")
	judgedAs(t, pb, healthy, conds)

	g.Expect(env.Update(pb, func() { pb.Spec.Suspend = true })).To(Succeed())
	judgedAs(t, pb, suspended, conds)

	edited(t, pb)
}

func podTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}
}

// markReady reports a pod Running and Ready, as its kubelet would.
func markReady(t *testing.T, p *corev1.Pod) {
	t.Helper()
	now := metav1.Now()
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}
	if err := env.Client.Status().Update(ctx, p); err != nil {
		t.Fatalf("marking pod %s ready: %v", p.Name, err)
	}
}

// quota makes the namespace's pod quota pods, with none used (envtest runs
// no quota controller).
func quota(t *testing.T, ns, pods string) {
	t.Helper()
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pods"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse(pods)}}}
	if err := env.Client.Create(ctx, q); err != nil {
		t.Fatal(err)
	}
	q.Status = corev1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse(pods)}}
	if err := env.Client.Status().Update(ctx, q); err != nil {
		t.Fatal(err)
	}
}

// deploymentStatus reports d rolled out, with the Progressing condition
// given, as the Deployment controller would.
func deploymentStatus(t *testing.T, d *appsv1.Deployment, progressing appsv1.DeploymentCondition) {
	t.Helper()
	g := testenv.NewG(t)
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
			return err
		}
		n := ptr.Deref(d.Spec.Replicas, 1)
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
				progressing,
			}}
		return env.Client.Status().Update(ctx, d)
	}).Should(Succeed())
}

// finishedJob creates a Job that succeeded a minute ago.
func finishedJob(t *testing.T, ns, name string) {
	t.Helper()
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: batchv1.JobSpec{
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}}}
	if err := env.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	testenv.FinishJob(job, batchv1.JobComplete, time.Now().Add(-time.Minute))
	if err := env.Client.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
}
