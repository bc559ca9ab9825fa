package podset_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	podsetcontroller "github.com/deckhand-dev/deckhand/internal/controller/podset"
	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/internal/testenv/faultinject"
)

// startPodSetController runs a manager with only the PodSet controller.
func startPodSetController(t *testing.T) {
	t.Helper()
	opts := env.ManagerOptions()
	opts.Controllers = []string{podsetcontroller.ControllerName}
	env.StartManager(t, opts)
}

// runPodSet starts the controller and creates a PodSet of the given size,
// shaped by the options, in a namespace of its own.
func runPodSet(t *testing.T, name string, size int32, opts ...func(*appsv1beta1.PodSet)) *appsv1beta1.PodSet {
	t.Helper()
	startPodSetController(t)
	set := newPodSet(env.Namespace(t), name, size)
	for _, o := range opts {
		o(set)
	}
	env.Create(t, set)
	return set
}

func newPodSet(ns, name string, size int32) *appsv1beta1.PodSet {
	return &appsv1beta1.PodSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       appsv1beta1.PodSetSpec{Replicas: size},
	}
}

// podsOf lists, straight from the apiserver, the pods a PodSet controls that
// count towards its size.
func podsOf(g Gomega, set *appsv1beta1.PodSet) []corev1.Pod {
	list := &corev1.PodList{}
	g.Expect(env.Client.List(context.Background(), list, client.InNamespace(set.Namespace))).To(Succeed())
	var out []corev1.Pod
	for _, p := range list.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == set.UID && p.DeletionTimestamp == nil &&
			p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out = append(out, p)
		}
	}
	return out
}

func podNames(pods []corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

// get reads the PodSet as the apiserver has it now.
func get(g Gomega, set *appsv1beta1.PodSet) *appsv1beta1.PodSet {
	out := &appsv1beta1.PodSet{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(set), out)).To(Succeed())
	return out
}

// settled waits until the PodSet has exactly n pods and its status names
// them, and returns the pods.
func settled(t *testing.T, set *appsv1beta1.PodSet, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	testenv.NewG(t).Eventually(func(g Gomega) {
		pods = podsOf(g, set)
		g.Expect(pods).To(HaveLen(n))
		st := get(g, set).Status
		g.Expect(st.PodNames).To(Equal(nilIfEmpty(podNames(pods))))
		g.Expect(st.Replicas).To(BeEquivalentTo(n))
	}).Should(Succeed())
	return pods
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// markReady does what a kubelet would: the pod runs and is ready.
func markReady(t *testing.T, pods ...corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		if err := env.Client.Status().Update(context.Background(), &p); err != nil {
			t.Fatalf("marking %s ready: %v", p.Name, err)
		}
	}
}

func scale(t *testing.T, set *appsv1beta1.PodSet, replicas int32) {
	t.Helper()
	ctx := context.Background()
	s := &autoscalingv1.Scale{}
	if err := env.Client.SubResource("scale").Get(ctx, set, s); err != nil {
		t.Fatalf("getting scale: %v", err)
	}
	s.Spec.Replicas = replicas
	if err := env.Client.SubResource("scale").Update(ctx, set, client.WithSubResourceBody(s)); err != nil {
		t.Fatalf("scaling to %d: %v", replicas, err)
	}
}

// A round of creations is one Event on the PodSet, not one per pod: at
// 1,000 pods, an Event per pod doubles the scale-up's writes.
func TestPodSetRecordsOneEventPerRound(t *testing.T) {
	g := testenv.NewG(t)
	set := runPodSet(t, "many", 20)
	pods := settled(t, set, 20)
	names := podNames(pods)
	slices.Sort(names)
	g.Eventually(env.Events(set.Namespace, set)).Should(ConsistOf(
		fmt.Sprintf("%s: Created 20 pods: %s and 17 more", podsetcontroller.EventSuccessfulCreate, strings.Join(names[:3], ", "))))

	scale(t, set, 19)
	settled(t, set, 19)
	g.Eventually(env.Events(set.Namespace, set)).Should(ContainElement(HavePrefix(podsetcontroller.EventSuccessfulDelete + ": Deleted pod: many-")))
	g.Expect(env.Events(set.Namespace, set)()).To(HaveLen(2))
}

// Events alike but for their note merge into one series that keeps the
// first note: a second round of creations made while the PodSet was
// unchanged (the first fell short; its status write was paced) showed as
// the first round's Event with count 2, hiding the pods it made. Each round
// names one of its pods as the related object, so every round is an Event
// of its own in kubectl events.
func TestPodSetShowsEveryRoundInItsEvents(t *testing.T) {
	g := testenv.NewG(t)
	r := podsetcontroller.NewPodSetReconciler(env.Client, env.Client, env.EventRecorder(t, podsetcontroller.ControllerName))

	set := newPodSet(env.Namespace(t), "rounds", 0)
	env.Create(t, set)
	round := func(names ...string) []*corev1.Pod {
		pods := make([]*corev1.Pod, len(names))
		for i, n := range names {
			pods[i] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: set.Namespace, Name: n}}
		}
		return pods
	}
	r.RecordCreated(set, round("rounds-a", "rounds-b"))
	r.RecordCreated(set, round("rounds-c", "rounds-d"))
	g.Eventually(env.Events(set.Namespace, set)).Should(ConsistOf(
		podsetcontroller.EventSuccessfulCreate+": Created 2 pods: rounds-a, rounds-b",
		podsetcontroller.EventSuccessfulCreate+": Created 2 pods: rounds-c, rounds-d"))
}

func TestPodSetRunsTheSeedPodAndScalesThroughTheScaleSubresource(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	set := runPodSet(t, "web", 3)
	ns := set.Namespace
	pods := settled(t, set, 3)
	for _, p := range pods {
		g.Expect(p.Spec.Containers).To(HaveLen(1))
		g.Expect(p.Spec.Containers[0].Image).To(Equal("busybox"))
		g.Expect(p.Spec.Containers[0].Command).To(Equal([]string{"sleep", "3600"}))
		g.Expect(p.Labels).To(HaveKeyWithValue(appsv1beta1.PodSetLabel, "web"))
		ref := metav1.GetControllerOf(&p)
		g.Expect(ref.Kind).To(Equal("PodSet"))
		g.Expect(*ref.BlockOwnerDeletion).To(BeTrue())
	}
	st := get(g, set).Status
	g.Expect(st.Selector).To(Equal("apps.deckhand.dev/podset=web"))
	g.Expect(st.ObservedGeneration).To(Equal(get(g, set).Generation))

	scale(t, set, 5)
	pods = settled(t, set, 5)
	g.Eventually(env.Events(ns, set)).Should(ContainElement(HavePrefix(podsetcontroller.EventSuccessfulCreate + ":")))

	// Three ready pods, one of them named by a user to go first: scaling
	// to 2 keeps the other two ready ones.
	markReady(t, pods[0], pods[1], pods[2])
	marked := pods[0].DeepCopy()
	marked.Annotations = map[string]string{appsv1beta1.DeleteFirstAnnotation: "true"}
	g.Expect(env.Client.Patch(ctx, marked, client.MergeFrom(&pods[0]))).To(Succeed())
	g.Eventually(func(g Gomega) int32 { return get(g, set).Status.ReadyReplicas }).Should(BeEquivalentTo(3))

	scale(t, set, 2)
	g.Expect(podNames(settled(t, set, 2))).To(Equal(podNames([]corev1.Pod{pods[1], pods[2]})),
		"the marked pod, then the unready ones, should have gone")
	g.Eventually(env.Events(ns, set)).Should(ContainElement(HavePrefix(podsetcontroller.EventSuccessfulDelete + ":")))
	series := map[string]string{"namespace": ns, "podset": "web"}
	g.Expect(testenv.Metric("deckhand_podset_pods_created_total", series)).To(Equal(5.0))
	g.Expect(testenv.Metric("deckhand_podset_pods_deleted_total", series)).To(Equal(3.0))
	g.Eventually(func(g Gomega) []metav1.Condition { return get(g, set).Status.Conditions }).Should(SatisfyAll(
		testenv.HaveCondition(appsv1beta1.ConditionAvailable, metav1.ConditionTrue, ""),
		testenv.HaveCondition(appsv1beta1.ConditionProgressing, metav1.ConditionFalse, "")))

	scale(t, set, 0)
	settled(t, set, 0)
}

func TestPodSetReplacesDeletedAndFinishedPods(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	set := runPodSet(t, "heal", 2)
	pods := settled(t, set, 2)

	g.Expect(env.Client.Delete(ctx, &pods[0])).To(Succeed())
	g.Eventually(func(g Gomega) []string { return get(g, set).Status.PodNames }).
		Should(SatisfyAll(HaveLen(2), Not(ContainElement(pods[0].Name))))
	settled(t, set, 2)

	ended := podsOf(g, set)[0]
	ended.Status.Phase = corev1.PodFailed
	g.Expect(env.Client.Status().Update(ctx, &ended)).To(Succeed())
	g.Eventually(func(g Gomega) []string { return get(g, set).Status.PodNames }).
		Should(SatisfyAll(HaveLen(2), Not(ContainElement(ended.Name))))
	settled(t, set, 2)
	// The finished pod is removed, not left to pile up.
	g.Eventually(func() error { return env.Client.Get(ctx, client.ObjectKeyFromObject(&ended), &corev1.Pod{}) }).
		Should(Satisfy(apierrors.IsNotFound))
}

func TestPodSetRecreatedUnderTheSameNameGetsPodsOfItsOwn(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	old := runPodSet(t, "same", 2)
	ns := old.Namespace
	oldPods := settled(t, old, 2)

	// envtest has no garbage collector: the old pods stay, still owned by
	// the old UID, exactly as they do in a cluster while the collector is
	// behind.
	g.Expect(env.Client.Delete(ctx, old)).To(Succeed())
	g.Eventually(func() error { return env.Client.Get(ctx, client.ObjectKeyFromObject(old), &appsv1beta1.PodSet{}) }).
		ShouldNot(Succeed())
	recreated := newPodSet(ns, "same", 2)
	g.Expect(env.Client.Create(ctx, recreated)).To(Succeed())
	g.Expect(recreated.UID).NotTo(Equal(old.UID))

	newPods := settled(t, recreated, 2)
	g.Expect(podNames(newPods)).NotTo(ContainElements(podNames(oldPods)))
	all := &corev1.PodList{}
	g.Expect(env.Client.List(ctx, all, client.InNamespace(ns))).To(Succeed())
	g.Expect(all.Items).To(HaveLen(4), "the old pods are neither adopted nor deleted, and no extra pods exist")
}

func TestPodSetCreatesNoExtraPodsWhenTheCacheLags(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	ctx := context.Background()

	set := newPodSet(ns, "stale", 3)
	g.Expect(env.Client.Create(ctx, set)).To(Succeed())

	// No manager: nothing watches pods, so the reconciler's cache never
	// shows the pods it creates.
	cached := faultinject.StaleLists(env.Client, &corev1.PodList{})
	r := podsetcontroller.NewPodSetReconciler(cached, cached, &events.FakeRecorder{})
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "stale"}}
	for range 5 {
		_, err := r.Reconcile(ctx, req)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(podsOf(g, set)).To(HaveLen(3), "pods created again on a stale view")
	g.Expect(get(g, set).Status.PodNames).To(BeEmpty(), "status reports what the cache shows")

	// A PodSet recreated under the same name is a new PodSet: the old one's
	// outstanding creations must not hold it back.
	g.Expect(env.Client.Delete(ctx, set)).To(Succeed())
	recreated := newPodSet(ns, "stale", 2)
	g.Expect(env.Client.Create(ctx, recreated)).To(Succeed())
	_, err := r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(podsOf(g, recreated)).To(HaveLen(2))
}

// While the cache has not shown a PodSet's own creations there is nothing to
// act on: the syncs that each pod event of a large scale-up queues read no
// pods (each would list and judge all of them).
func TestPodSetReadsNoPodsWhileItsCreationsAreOutstanding(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	set := newPodSet(env.Namespace(t), "busy", 3)
	env.Create(t, set)

	c, reads := faultinject.CountLists(faultinject.StaleLists(env.Client, &corev1.PodList{}))
	r := podsetcontroller.NewPodSetReconciler(c, c, &events.FakeRecorder{})
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(set)}
	_, err := r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(podsOf(g, set)).To(HaveLen(3))
	g.Expect(get(g, set).Status.ObservedGeneration).To(Equal(get(g, set).Generation))

	listed := reads.Lists()
	for range 5 {
		res, err := r.Reconcile(ctx, req)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.RequeueAfter).To(BeNumerically(">", 0), "a lost pod event must not leave it waiting forever")
	}
	g.Expect(reads.Lists()).To(Equal(listed), "pods listed while the PodSet's own creations were outstanding")
}

// A create whose answer is lost (a timeout, a connection cut while etcd
// restarts) may have made its pod. Counted as never made, as the
// ReplicaSet controller counts it, the pod shows up after its replacement
// was created: found by the fault suite, 215 live pods of a PodSet of 200
// after an etcd restart. The PodSet asks the apiserver instead.
func TestPodSetCreatesNoExtraPodsWhenCreateAnswersAreLost(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	set := newPodSet(env.Namespace(t), "lost", 3)
	env.Create(t, set)

	// The first create is made but answers an error (the slow start then
	// stops), and the cache never shows a pod.
	c := faultinject.LoseCreateResponses(faultinject.StaleLists(env.Client, &corev1.PodList{}), 1)
	r := podsetcontroller.NewPodSetReconciler(c, c, &events.FakeRecorder{})
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(set)}
	_, err := r.Reconcile(ctx, req)
	g.Expect(err).To(MatchError(ContainSubstring(faultinject.ErrCreateResponseLost.Error())))
	g.Expect(podsOf(g, set)).To(HaveLen(1))

	for range 3 {
		_, _ = r.Reconcile(ctx, req)
	}
	g.Expect(len(podsOf(g, set))).To(BeNumerically("<=", 3), "pods created again for a creation whose answer was lost")

	// Once the cache shows the pod, the set fills up.
	r.ObserveCreations(set.UID, podNames(podsOf(g, set))...)
	r.Client = withoutIndexes{env.Client}
	_, err = r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(podsOf(g, set)).To(HaveLen(3))
}

// PodSet names its pods itself, with a random suffix: one met an existing
// pod's name at 300 pods and showed as a Warning, FailedCreate: pods "big-"
// already exists. The pod is created under another name instead, silently.
func TestPodSetRetriesATakenPodNameSilently(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	taken := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "clash-aaaaa"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	env.Create(t, taken)
	set := newPodSet(ns, "clash", 2)
	env.Create(t, set)

	names := []string{"clash-aaaaa", "clash-bbbbb", "clash-ccccc"}
	rec := events.NewFakeRecorder(10)
	cached := withoutIndexes{env.Client}
	r := podsetcontroller.NewPodSetReconciler(cached, cached, rec)
	next := make(chan string, len(names))
	for _, n := range names {
		next <- n
	}
	r.NamePodsWith(func(*appsv1beta1.PodSet) string { return <-next })
	_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(set)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(podNames(podsOf(g, set))).To(ConsistOf("clash-bbbbb", "clash-ccccc"))
	close(rec.Events)
	for e := range rec.Events {
		g.Expect(e).NotTo(ContainSubstring(podsetcontroller.EventFailedCreate))
	}
}

// A pod's Add is delivered more than once: two informers serving one
// namespace while the scoped cache switches between them, a new informer's
// initial list, a relist. Counted, the creations of a 300-pod scale-up were
// met at about half and the next sync made 12 pods too many (seen on the
// local cluster). Kept by name, replayed Adds satisfy nothing.
func TestPodSetCreatesNoExtraPodsWhenPodEventsAreReplayed(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	set := newPodSet(env.Namespace(t), "replayed", 6)
	env.Create(t, set)

	// The cache shows none of the pods; the informers deliver the Adds of
	// the first three, each twice.
	cached := faultinject.StaleLists(env.Client, &corev1.PodList{})
	r := podsetcontroller.NewPodSetReconciler(cached, cached, &events.FakeRecorder{})
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(set)}
	_, err := r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	names := podNames(podsOf(g, set))
	g.Expect(names).To(HaveLen(6))
	r.ObserveCreations(set.UID, names[:3]...)
	r.ObserveCreations(set.UID, names[:3]...)

	_, err = r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(podsOf(g, set)).To(HaveLen(6), "replayed pod events counted as the creations still outstanding")
}

func TestPodSetStopsCreatingAtTheQuotaAndSaysSo(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	ctx := context.Background()

	// envtest runs no quota controller: set the quota's status by hand;
	// the apiserver's quota admission counts from there.
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resourceQuantity("2")}},
	}
	g.Expect(env.Client.Create(ctx, quota)).To(Succeed())
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{corev1.ResourcePods: resourceQuantity("0")}}
	g.Expect(env.Client.Status().Update(ctx, quota)).To(Succeed())

	startPodSetController(t)
	set := newPodSet(ns, "quota", 5)
	g.Expect(env.Client.Create(ctx, set)).To(Succeed())
	settled(t, set, 2)
	g.Eventually(func(g Gomega) {
		conds := get(g, set).Status.Conditions
		g.Expect(conds).To(testenv.HaveCondition(appsv1beta1.ConditionReplicaFailure, metav1.ConditionTrue, appsv1beta1.ReasonFailedCreate))
		g.Expect(meta.FindStatusCondition(conds, appsv1beta1.ConditionReplicaFailure).Message).To(ContainSubstring("exceeded quota"))
		g.Expect(env.Events(ns, set)()).To(ContainElement(HavePrefix(podsetcontroller.EventFailedCreate + ":")))
	}).Should(Succeed())
	g.Expect(podsOf(g, set)).To(HaveLen(2))

	// Room again: the PodSet fills up and the failure clears.
	quota = &corev1.ResourceQuota{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "pods"}, quota)).To(Succeed())
	quota.Spec.Hard[corev1.ResourcePods] = resourceQuantity("10")
	g.Expect(env.Client.Update(ctx, quota)).To(Succeed())
	quota.Status.Hard = quota.Spec.Hard
	g.Expect(env.Client.Status().Update(ctx, quota)).To(Succeed())
	settled(t, set, 5)
	g.Eventually(func(g Gomega) *metav1.Condition {
		return meta.FindStatusCondition(get(g, set).Status.Conditions, appsv1beta1.ConditionReplicaFailure)
	}).Should(BeNil())
}

func TestPodSetRollsOutTemplateChangesOnePodAtATime(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	set := runPodSet(t, "roll", 3, func(s *appsv1beta1.PodSet) { s.Spec.Template = seedTemplate("busybox:1.36") })
	markReady(t, settled(t, set, 3)...)

	g.Eventually(func(g Gomega) error {
		cur := get(g, set)
		cur.Spec.Template.Spec.Containers[0].Image = "busybox:1.37"
		return env.Client.Update(ctx, cur)
	}).Should(Succeed())

	// With maxUnavailable 1 (the default) one ready pod at a time is
	// replaced, and the next only once its replacement is ready.
	for updated := 1; updated <= 3; updated++ {
		var fresh []corev1.Pod
		g.Eventually(func(g Gomega) {
			pods := podsOf(g, set)
			g.Expect(pods).To(HaveLen(3))
			fresh = fresh[:0]
			ready := 0
			for _, p := range pods {
				if p.Spec.Containers[0].Image == "busybox:1.37" {
					fresh = append(fresh, p)
				}
				if p.Status.Phase == corev1.PodRunning {
					ready++
				}
			}
			g.Expect(fresh).To(HaveLen(updated))
			g.Expect(ready).To(Equal(2), "more than maxUnavailable pods are unready")
		}).Should(Succeed())
		g.Consistently(func(g Gomega) int { return len(podsOf(g, set)) - countImage(podsOf(g, set), "busybox:1.37") }).
			WithTimeout(time.Second).Should(Equal(3-updated), "an old pod went while the new one was unready")
		for _, p := range fresh {
			if p.Status.Phase != corev1.PodRunning {
				markReady(t, p)
			}
		}
	}
	g.Eventually(func(g Gomega) int32 { return get(g, set).Status.UpdatedReplicas }).Should(BeEquivalentTo(3))
}

func TestPodSetOnDeleteReplacesOnlyDeletedPods(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	set := runPodSet(t, "ondelete", 2, func(s *appsv1beta1.PodSet) {
		s.Spec.Template = seedTemplate("busybox:1.36")
		s.Spec.UpdateStrategy = appsv1beta1.PodSetUpdateStrategy{Type: appsv1beta1.OnDeleteStrategy}
	})
	pods := settled(t, set, 2)
	markReady(t, pods...)

	g.Eventually(func(g Gomega) error {
		cur := get(g, set)
		cur.Spec.Template.Spec.Containers[0].Image = "busybox:1.37"
		return env.Client.Update(ctx, cur)
	}).Should(Succeed())
	g.Eventually(func(g Gomega) int64 { return get(g, set).Status.ObservedGeneration }).Should(Equal(get(g, set).Generation))
	g.Consistently(func(g Gomega) []string { return podNames(podsOf(g, set)) }).WithTimeout(time.Second).Should(Equal(podNames(pods)))

	g.Expect(env.Client.Delete(ctx, &pods[0])).To(Succeed())
	g.Eventually(func(g Gomega) int { return countImage(podsOf(g, set), "busybox:1.37") }).Should(Equal(1))
	g.Expect(podsOf(g, set)).To(HaveLen(2))
}

func TestPodSetSchemaRefusesInvalidSpecsNamingTheField(t *testing.T) {
	ns := env.Namespace(t)
	noLabels := seedTemplate("busybox")
	noLabels.Labels = nil
	noContainers := seedTemplate("busybox")
	noContainers.Spec.Containers = []corev1.Container{}
	zero := intstr.FromInt32(0)
	tooMany := intstr.FromString("150%")
	tests := map[string]struct {
		name string
		spec appsv1beta1.PodSetSpec
		want []string
	}{
		"name too long for a label": {name: strings.Repeat("a", 64), spec: appsv1beta1.PodSetSpec{Replicas: 1},
			want: []string{"metadata.name: must be no more than 63 characters"}},
		"negative replicas": {spec: appsv1beta1.PodSetSpec{Replicas: -1}, want: []string{"spec.replicas", "greater than or equal to 0"}},
		"absurd replicas":   {spec: appsv1beta1.PodSetSpec{Replicas: 1_000_000}, want: []string{"spec.replicas", "less than or equal to 10000"}},
		"no labels":         {spec: appsv1beta1.PodSetSpec{Replicas: 1, Template: noLabels}, want: []string{"spec.template.metadata.labels", "at least one label"}},
		"no containers":     {spec: appsv1beta1.PodSetSpec{Replicas: 1, Template: noContainers}, want: []string{"spec.template.spec.containers", "at least one container"}},
		"bad strategy type": {spec: appsv1beta1.PodSetSpec{Replicas: 1, UpdateStrategy: appsv1beta1.PodSetUpdateStrategy{Type: "Recreate"}}, want: []string{"spec.updateStrategy.type", "Unsupported value"}},
		"maxUnavailable 0 without surge": {spec: appsv1beta1.PodSetSpec{Replicas: 1, UpdateStrategy: appsv1beta1.PodSetUpdateStrategy{Type: appsv1beta1.RollingUpdateStrategy, RollingUpdate: appsv1beta1.PodSetRollingUpdate{MaxUnavailable: &zero}}},
			want: []string{"spec.updateStrategy.rollingUpdate.maxUnavailable", "cannot both be 0"}},
		"maxUnavailable 0% and maxSurge 0": {spec: appsv1beta1.PodSetSpec{Replicas: 1, UpdateStrategy: appsv1beta1.PodSetUpdateStrategy{Type: appsv1beta1.RollingUpdateStrategy, RollingUpdate: appsv1beta1.PodSetRollingUpdate{MaxUnavailable: new(intstr.FromString("0%")), MaxSurge: &zero}}},
			want: []string{"spec.updateStrategy.rollingUpdate.maxUnavailable", "cannot both be 0"}},
		"negative maxSurge": {spec: appsv1beta1.PodSetSpec{Replicas: 1, UpdateStrategy: appsv1beta1.PodSetUpdateStrategy{Type: appsv1beta1.RollingUpdateStrategy, RollingUpdate: appsv1beta1.PodSetRollingUpdate{MaxSurge: new(intstr.FromInt32(-1))}}},
			want: []string{"spec.updateStrategy.rollingUpdate.maxSurge", "at least 0"}},
		"maxSurge with OnDelete": {spec: appsv1beta1.PodSetSpec{Replicas: 1, UpdateStrategy: appsv1beta1.PodSetUpdateStrategy{Type: appsv1beta1.OnDeleteStrategy, RollingUpdate: appsv1beta1.PodSetRollingUpdate{MaxSurge: new(intstr.FromInt32(1))}}},
			want: []string{"spec.updateStrategy.rollingUpdate", "only allowed with type RollingUpdate"}},
		"negative minReadySeconds": {spec: appsv1beta1.PodSetSpec{Replicas: 1, MinReadySeconds: -1}, want: []string{"spec.minReadySeconds", "greater than or equal to 0"}},
		"restartPolicy Never": {spec: appsv1beta1.PodSetSpec{Replicas: 1, Template: withSpec(func(s *corev1.PodSpec) { s.RestartPolicy = corev1.RestartPolicyNever })},
			want: []string{"spec.template.spec.restartPolicy", "must be Always"}},
		"activeDeadlineSeconds": {spec: appsv1beta1.PodSetSpec{Replicas: 1, Template: withSpec(func(s *corev1.PodSpec) { s.ActiveDeadlineSeconds = new(int64(60)) })},
			want: []string{"spec.template.spec.activeDeadlineSeconds", "forbidden"}},
		"container without image": {spec: appsv1beta1.PodSetSpec{Replicas: 1, Template: withSpec(func(s *corev1.PodSpec) { s.Containers[0].Image = "" })},
			want: []string{"spec.template.spec.containers", "every container needs an image"}},
		"maxUnavailable 150%": {spec: appsv1beta1.PodSetSpec{Replicas: 1, UpdateStrategy: appsv1beta1.PodSetUpdateStrategy{Type: appsv1beta1.RollingUpdateStrategy, RollingUpdate: appsv1beta1.PodSetRollingUpdate{MaxUnavailable: &tooMany}}},
			want: []string{"spec.updateStrategy.rollingUpdate.maxUnavailable", "percentage"}},
		"maxUnavailable with OnDelete": {spec: appsv1beta1.PodSetSpec{Replicas: 1, UpdateStrategy: appsv1beta1.PodSetUpdateStrategy{Type: appsv1beta1.OnDeleteStrategy, RollingUpdate: appsv1beta1.PodSetRollingUpdate{MaxUnavailable: new(intstr.FromInt32(1))}}},
			want: []string{"spec.updateStrategy.rollingUpdate", "only allowed with type RollingUpdate"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			set := &appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "bad-"}, Spec: tc.spec}
			if tc.name != "" {
				set.Name, set.GenerateName = tc.name, ""
			}
			err := env.Client.Create(context.Background(), set)
			g := testenv.NewG(t)
			g.Expect(err).To(HaveOccurred())
			for _, w := range tc.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
		})
	}
}

// withSpec is the seed template changed by mutate.
func withSpec(mutate func(*corev1.PodSpec)) *corev1.PodTemplateSpec {
	t := seedTemplate("busybox")
	mutate(&t.Spec)
	return t
}

func seedTemplate(image string) *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "sleep"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "busybox", Image: image, Command: []string{"sleep", "3600"},
		}}},
	}
}

func resourceQuantity(s string) resource.Quantity { return resource.MustParse(s) }

func countImage(pods []corev1.Pod, image string) int {
	n := 0
	for _, p := range pods {
		if p.Spec.Containers[0].Image == image {
			n++
		}
	}
	return n
}

func TestPodSetSeriesGoWithThePodSet(t *testing.T) {
	g := testenv.NewG(t)
	set := runPodSet(t, "gone", 2)
	settled(t, set, 2)
	series := map[string]string{"namespace": set.Namespace, "podset": "gone"}
	g.Expect(testenv.MetricSeries("deckhand_podset_pods_created_total", series)).To(Equal(1))

	g.Expect(env.Client.Delete(context.Background(), set)).To(Succeed())
	g.Eventually(func() (int, error) { return testenv.MetricSeries("deckhand_podset_pods_created_total", series) }).Should(BeZero())
}

func TestPodSetChecksItsExpectationsBeforeItLists(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	set := newPodSet(env.Namespace(t), "order", 3)
	env.Create(t, set)

	// The cache never shows a pod (StaleLists); once armed, the pod
	// informer delivers the three creations while the list is on its way
	// back, after its snapshot was taken.
	var r *podsetcontroller.PodSetReconciler
	armed := false
	c := faultinject.DelayedLists(faultinject.StaleLists(env.Client, &corev1.PodList{}), func() {
		if armed {
			r.ObserveCreations(set.UID, podNames(podsOf(g, set))...)
		}
	})
	r = podsetcontroller.NewPodSetReconciler(c, c, &events.FakeRecorder{})
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(set)}
	_, err := r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(podsOf(g, set)).To(HaveLen(3))

	armed = true
	_, err = r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(podsOf(g, set)).To(HaveLen(3), "a list older than the expectations it was checked against passed as synced")
}

func TestPodSetStatusIsWrittenWhenAStaleCopyLooksEqual(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	set := newPodSet(env.Namespace(t), "sticky", 1)
	env.Create(t, set)
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(set)}

	// First sync: no pod yet, status A (0 of 1). The cache will keep
	// showing the PodSet as it is now, with status A.
	cached := withoutIndexes{env.Client}
	r := podsetcontroller.NewPodSetReconciler(cached, cached, &events.FakeRecorder{})
	// The clock moves a second each time it is read: the pacing of
	// counts holds none of these writes back.
	now := time.Now()
	r.Now = func() time.Time { now = now.Add(time.Second); return now }
	_, err := r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	stale := get(g, set)
	g.Expect(stale.Status.Replicas).To(BeZero())
	r.Client = faultinject.StaleGets(withoutIndexes{env.Client}, stale)
	r.CacheCaughtUp(req.NamespacedName) // its pod reads are uncached
	// The pod it created shows: status B (1 of 1) is written, though the
	// cache still has A.
	_, err = r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(get(g, set).Status.Replicas).To(BeEquivalentTo(1))

	// The pod goes: the status to write is A again, just what the stale
	// copy shows. The apiserver holds B, so it must still be written.
	g.Expect(env.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(set.Namespace))).To(Succeed())
	_, err = r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(get(g, set).Status).To(Equal(stale.Status), "status stuck at what the apiserver held")
}

// While pods start, the counts change with nearly every pod event; a
// status names every pod, so writing each change would send the apiserver
// a large patch per event. Changes that only count are written at most once
// a second (and surely then); changes a user waits on at once.
func TestPodSetPacesStatusWritesWhilePodsChange(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	set := newPodSet(env.Namespace(t), "paced", 3)
	env.Create(t, set)
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(set)}
	// The reconciler's clock runs ahead of the pods' (markReady stamps
	// real time), so that no pod looks ready only in the future.
	now := time.Now().Add(time.Hour)
	cached := withoutIndexes{env.Client}
	r := podsetcontroller.NewPodSetReconciler(cached, cached, &events.FakeRecorder{})
	r.Now = func() time.Time { return now }
	sync := func() ctrl.Result {
		res, err := r.Reconcile(ctx, req)
		g.Expect(err).NotTo(HaveOccurred())
		return res
	}

	sync()                              // creates the pods
	r.CacheCaughtUp(req.NamespacedName) // its pod reads are uncached
	sync()                              // all exist, waiting for ready: a step of the way, paced
	g.Expect(get(g, set).Status.Replicas).To(BeZero(), "a step of the way written within a second of the last write")
	now = now.Add(time.Second)
	sync()
	pods := podsOf(g, set)
	g.Expect(get(g, set).Status.Replicas).To(BeEquivalentTo(3))

	now = now.Add(100 * time.Millisecond)
	markReady(t, pods[0])
	res := sync()
	g.Expect(get(g, set).Status.ReadyReplicas).To(BeZero(), "a count written within a second of the last write")
	g.Expect(res.RequeueAfter).To(BeNumerically("~", 900*time.Millisecond, time.Millisecond), "it must come back to write it")

	now = now.Add(time.Second)
	sync()
	g.Expect(get(g, set).Status.ReadyReplicas).To(BeEquivalentTo(1), "the held-back count, once the second has passed")

	now = now.Add(100 * time.Millisecond)
	markReady(t, pods[1:]...)
	sync()
	st := get(g, set).Status
	g.Expect(st.ReadyReplicas).To(BeEquivalentTo(3), "a settled set is written at once")
	g.Expect(st.Conditions).To(testenv.HaveCondition(appsv1beta1.ConditionProgressing, metav1.ConditionFalse, appsv1beta1.ReasonUpToDate))
}

func TestPodSetReplacesFinishedPodsWithBackoffAndSaysWhy(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	set := newPodSet(env.Namespace(t), "crash", 1)
	env.Create(t, set)
	rec := events.NewFakeRecorder(100)
	cached := withoutIndexes{env.Client}
	r := podsetcontroller.NewPodSetReconciler(cached, cached, rec)
	now := time.Now()
	r.Now = func() time.Time { return now }
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(set)}
	sync := func() reconcile.Result {
		res, err := r.Reconcile(ctx, req)
		g.Expect(err).NotTo(HaveOccurred())
		r.CacheCaughtUp(req.NamespacedName) // its reads are uncached
		return res
	}
	fail := func(p corev1.Pod) {
		p.Status.Phase = corev1.PodFailed
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "busybox", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}}}
		g.Expect(env.Client.Status().Update(ctx, &p)).To(Succeed())
	}

	sync()
	first := podsOf(g, set)
	g.Expect(first).To(HaveLen(1))
	fail(first[0])
	sync() // the first finished pod is replaced at once
	second := podsOf(g, set)
	g.Expect(second).To(HaveLen(1))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(&first[0]), &corev1.Pod{})).To(Satisfy(apierrors.IsNotFound))
	g.Eventually(rec.Events).Should(Receive(SatisfyAll(ContainSubstring(podsetcontroller.EventFinishedPod),
		ContainSubstring(first[0].Name), ContainSubstring("exited with code 3 (Error)"))))

	fail(second[0])
	res := sync() // the next one waits, and keeps its evidence meanwhile
	g.Expect(podsOf(g, set)).To(BeEmpty(), "a finished pod was replaced in a hot loop")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(&second[0]), &corev1.Pod{})).To(Succeed())
	g.Expect(res.RequeueAfter).To(BeNumerically(">", 0))

	now = now.Add(res.RequeueAfter)
	sync()
	g.Expect(podsOf(g, set)).To(HaveLen(1))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(&second[0]), &corev1.Pod{})).To(Satisfy(apierrors.IsNotFound))
}

func TestPodSetAdoptsOrphansAndReleasesRelabelledPods(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	startPodSetController(t)
	orphan := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orphan", Labels: map[string]string{appsv1beta1.PodSetLabel: "adopt"}},
		Spec:       seedTemplate("busybox").Spec,
	}
	env.Create(t, orphan)
	// OnDelete: the orphan has no template hash, so a rolling update would
	// replace it once adopted.
	set := newPodSet(ns, "adopt", 2)
	set.Spec.UpdateStrategy.Type = appsv1beta1.OnDeleteStrategy
	env.Create(t, set)

	g.Expect(podNames(settled(t, set, 2))).To(ContainElement("orphan"))
	all := &corev1.PodList{}
	g.Expect(env.Client.List(ctx, all, client.InNamespace(ns))).To(Succeed())
	g.Expect(all.Items).To(HaveLen(2), "the orphan was not adopted: one pod too many")

	// Relabelled out of the set: released, and replaced.
	g.Expect(env.Update(orphan, func() { orphan.Labels[appsv1beta1.PodSetLabel] = "elsewhere" })).To(Succeed())
	g.Eventually(func(g Gomega) *metav1.OwnerReference {
		p := &corev1.Pod{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(orphan), p)).To(Succeed())
		return metav1.GetControllerOf(p)
	}).Should(BeNil())
	g.Expect(podNames(settled(t, set, 2))).NotTo(ContainElement("orphan"))
	g.Expect(env.Client.List(ctx, all, client.InNamespace(ns))).To(Succeed())
	g.Expect(all.Items).To(HaveLen(3))
}

// withoutIndexes lets a reconciler list through an uncached client: it
// drops the field selector of the cache's pod index, which the apiserver
// does not know (the reconciler checks each pod's owner itself).
type withoutIndexes struct{ client.Client }

func (c withoutIndexes) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	o.FieldSelector = nil
	return c.Client.List(ctx, list, o)
}

// A pod replaced in a settled set (what every set of a failover goes
// through) costs the set one status write when the replacement is ready
// within a second: the sync that makes it holds back the status saying a
// pod is missing, which the replacement is about to make stale. Written
// at once, it doubled the status writes of a failover, and at 1,000 sets
// the replacements waited behind them (make bench, scale-podset). A
// replacement that takes longer is written at the end of the second.
func TestPodSetWritesAReplacedPodsStatusOnce(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	set := newPodSet(env.Namespace(t), "replaced", 3)
	env.Create(t, set)
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(set)}
	now := time.Now().Add(time.Hour) // ahead of markReady's stamps
	c := &countingStatus{withoutIndexes: withoutIndexes{env.Client}}
	r := podsetcontroller.NewPodSetReconciler(c, c, &events.FakeRecorder{})
	r.Now = func() time.Time { return now }
	sync := func() ctrl.Result {
		res, err := r.Reconcile(ctx, req)
		g.Expect(err).NotTo(HaveOccurred())
		r.CacheCaughtUp(req.NamespacedName) // its pod reads are uncached
		return res
	}
	sync()
	sync()
	markReady(t, podsOf(g, set)...)
	now = now.Add(2 * time.Second)
	sync()
	g.Expect(get(g, set).Status.Conditions).To(testenv.HaveCondition(appsv1beta1.ConditionProgressing, metav1.ConditionFalse, appsv1beta1.ReasonUpToDate))
	notReady := func() []corev1.Pod {
		var out []corev1.Pod
		for _, p := range podsOf(g, set) {
			if p.Status.Phase != corev1.PodRunning {
				out = append(out, p)
			}
		}
		return out
	}

	// Ready within the second: one write, the settled set.
	c.patches.Store(0)
	gone := podsOf(g, set)[0]
	g.Expect(env.Client.Delete(ctx, &gone)).To(Succeed())
	now = now.Add(2 * time.Second)
	held := sync() // makes the replacement; the missing pod is held back
	g.Expect(c.patches.Load()).To(BeZero(), "a replacement's first news written at once")
	g.Expect(held.RequeueAfter).To(BeNumerically("~", time.Second, time.Millisecond), "a held-back status must be looked at again when due")
	now = now.Add(100 * time.Millisecond)
	sync() // the replacement exists, not ready yet
	g.Expect(c.patches.Load()).To(BeZero())
	fresh := notReady()
	g.Expect(fresh).To(HaveLen(1))
	markReady(t, fresh...)
	now = now.Add(100 * time.Millisecond)
	sync() // settled: written at once
	st := get(g, set).Status
	g.Expect(st.ReadyReplicas).To(BeEquivalentTo(3))
	g.Expect(st.PodNames).NotTo(ContainElement(gone.Name))
	g.Expect(st.Conditions).To(testenv.HaveCondition(appsv1beta1.ConditionProgressing, metav1.ConditionFalse, appsv1beta1.ReasonUpToDate))
	g.Expect(c.patches.Load()).To(BeEquivalentTo(1), "status writes for one pod replaced within a second")

	// Not ready within the second: written when the second is over.
	c.patches.Store(0)
	gone = podsOf(g, set)[0]
	g.Expect(env.Client.Delete(ctx, &gone)).To(Succeed())
	now = now.Add(2 * time.Second)
	sync()
	now = now.Add(100 * time.Millisecond)
	sync()
	g.Expect(c.patches.Load()).To(BeZero())
	now = now.Add(time.Second)
	sync()
	g.Expect(c.patches.Load()).To(BeEquivalentTo(1), "a replacement not ready after a second is told")
	st = get(g, set).Status
	g.Expect(st.ReadyReplicas).To(BeEquivalentTo(2))
	g.Expect(st.Conditions).To(testenv.HaveCondition(appsv1beta1.ConditionProgressing, metav1.ConditionTrue, appsv1beta1.ReasonWaitingForReady))
	markReady(t, notReady()...)
	now = now.Add(100 * time.Millisecond)
	sync()
	g.Expect(get(g, set).Status.ReadyReplicas).To(BeEquivalentTo(3), "a settled set is written at once")
	g.Expect(c.patches.Load()).To(BeEquivalentTo(2))
}

// A hold is news of a replacement only: a spec changed while a status is
// held is acknowledged at once, and a PodSet deleted while held leaves
// nothing held behind it.
func TestAHeldStatusGivesWayToANewSpecAndGoesWithItsPodSet(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	set := newPodSet(env.Namespace(t), "held", 3)
	env.Create(t, set)
	key := client.ObjectKeyFromObject(set)
	req := reconcile.Request{NamespacedName: key}
	now := time.Now().Add(time.Hour) // ahead of markReady's stamps
	c := &countingStatus{withoutIndexes: withoutIndexes{env.Client}}
	r := podsetcontroller.NewPodSetReconciler(c, c, &events.FakeRecorder{})
	r.Now = func() time.Time { return now }
	sync := func() {
		_, err := r.Reconcile(ctx, req)
		g.Expect(err).NotTo(HaveOccurred())
		r.CacheCaughtUp(key) // its pod reads are uncached
	}
	sync()
	sync()
	markReady(t, podsOf(g, set)...)
	now = now.Add(2 * time.Second)
	sync()
	g.Expect(get(g, set).Status.ReadyReplicas).To(BeEquivalentTo(3))

	// A pod lost and replaced: its news is held.
	c.patches.Store(0)
	gone := podsOf(g, set)[0]
	g.Expect(env.Client.Delete(ctx, &gone)).To(Succeed())
	now = now.Add(2 * time.Second)
	sync()
	g.Expect(r.Holding(key, now)).To(BeTrue(), "a replacement's news is held")
	g.Expect(c.patches.Load()).To(BeZero())

	// The spec changes within the hold: written at once. (A scale-down,
	// which leaves Available as it was: it alone would not end the hold.)
	scale(t, set, 2)
	now = now.Add(100 * time.Millisecond)
	sync()
	g.Expect(c.patches.Load()).To(BeEquivalentTo(1), "a new generation waits for a replacement's hold")
	st := get(g, set).Status
	g.Expect(st.ObservedGeneration).To(Equal(get(g, set).Generation))
	g.Expect(podsOf(g, set)).To(HaveLen(2))
	g.Expect(r.Holding(key, now)).To(BeFalse(), "the hold is over once the status was written")

	// Deleted within a new hold: nothing is held for its name.
	var notReady []corev1.Pod
	for _, p := range podsOf(g, set) {
		if p.Status.Phase != corev1.PodRunning {
			notReady = append(notReady, p)
		}
	}
	markReady(t, notReady...)
	now = now.Add(2 * time.Second)
	sync()
	g.Expect(get(g, set).Status.ReadyReplicas).To(BeEquivalentTo(2))
	gone = podsOf(g, set)[0]
	g.Expect(env.Client.Delete(ctx, &gone)).To(Succeed())
	now = now.Add(2 * time.Second)
	sync()
	g.Expect(r.Holding(key, now)).To(BeTrue())
	g.Expect(env.Client.Delete(ctx, get(g, set))).To(Succeed())
	g.Eventually(func() bool { return apierrors.IsNotFound(env.Client.Get(ctx, key, &appsv1beta1.PodSet{})) }).Should(BeTrue())
	sync()
	g.Expect(r.Holding(key, now)).To(BeFalse(), "a deleted PodSet's hold outlives it")
}

// countingStatus counts the status patches written through it.
type countingStatus struct {
	withoutIndexes
	patches atomic.Int64
}

func (c *countingStatus) Status() client.SubResourceWriter {
	return countingPatches{c.withoutIndexes.Status(), &c.patches}
}

type countingPatches struct {
	client.SubResourceWriter
	n *atomic.Int64
}

func (w countingPatches) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	w.n.Add(1)
	return w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

// A scale-down acts on the pods its cache shows. A pod deleted since and
// replaced by another of its name (a new UID) is not the pod the PodSet
// chose: its delete carries the chosen pod's UID, which the apiserver
// checks, so the newcomer stays.
func TestPodSetScaleDownLeavesAPodThatTookTheNameSince(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	set := newPodSet(ns, "renamed", 2)
	g.Expect(env.Client.Create(ctx, set)).To(Succeed())
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(set)}
	// No manager: the reconciler's cache (its field index of pods by
	// PodSet) is a list the test gives it, empty first.
	empty := faultinject.StaleLists(env.Client, &corev1.PodList{})
	_, err := podsetcontroller.NewPodSetReconciler(empty, env.Client, &events.FakeRecorder{}).Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	pods := podsOf(g, get(g, set))
	g.Expect(pods).To(HaveLen(2))

	// The cache's view, then the first pod gone and its name taken again.
	seen := &corev1.PodList{}
	g.Expect(env.Client.List(ctx, seen, client.InNamespace(ns))).To(Succeed())
	old := pods[0]
	g.Expect(env.Client.Delete(ctx, &old, client.GracePeriodSeconds(0))).To(Succeed())
	g.Eventually(env.Exists(&old)).Should(BeFalse())
	newcomer := old.DeepCopy()
	newcomer.ResourceVersion, newcomer.UID, newcomer.CreationTimestamp = "", "", metav1.Time{}
	newcomer.Status = corev1.PodStatus{}
	g.Expect(env.Client.Create(ctx, newcomer)).To(Succeed())

	scaled := get(g, set)
	scaled.Spec.Replicas = 0
	g.Expect(env.Client.Update(ctx, scaled)).To(Succeed())
	cached := faultinject.StaleLists(env.Client, seen)
	_, _ = podsetcontroller.NewPodSetReconciler(cached, env.Client, &events.FakeRecorder{}).Reconcile(ctx, req)

	now := &corev1.Pod{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(newcomer), now)).To(Succeed(),
		"the pod that took %s's name was deleted in its place", old.Name)
	g.Expect(now.UID).To(Equal(newcomer.UID))
	g.Expect(now.DeletionTimestamp).To(BeNil(), "the pod that took %s's name is being deleted", old.Name)
}
