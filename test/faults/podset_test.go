//go:build faults

package faults_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	podsetcontroller "github.com/deckhand-dev/deckhand/internal/controller/podset"
)

// The PodSet invariants.
const (
	checkPodSetBound    = "never more than size (+maxSurge in a rollout) live pods"
	checkPodSetForeign  = "never deletes a pod it does not own"
	checkPodSetAdoption = "never takes a pod another controller owns or its selector does not match"
)

// podSetCase is a PodSet changed from one shape to another.
type podSetCase struct {
	from, to int32
	// rollout changes the template's image too, with maxSurge 1 and
	// maxUnavailable 0.
	rollout bool
}

func podSetScenarios() []scenario {
	cases := []struct {
		name string
		c    podSetCase
	}{
		{"PodSet scale up 0→5", podSetCase{from: 0, to: 5}},
		{"PodSet scale down 5→2", podSetCase{from: 5, to: 2}},
		{"PodSet rollout of 3, maxSurge 1", podSetCase{from: 3, to: 3, rollout: true}},
	}
	out := make([]scenario, 0, len(cases))
	for _, c := range cases {
		out = append(out, scenario{name: c.name, controllers: []string{podsetcontroller.ControllerName}, staleCrashes: true,
			start: func(t *testing.T, f *fixture) plan { return podSetPlan(t, f, c.c) }})
	}
	return out
}

const podSetName = "web"

func podSetPlan(t *testing.T, f *fixture, c podSetCase) plan {
	ctx := context.Background()
	ns := env.Namespace(t)
	key := types.NamespacedName{Namespace: ns, Name: podSetName}
	surge := intstr.FromInt32(1)
	unavailable := intstr.FromInt32(0)
	newSet := func(size int32) *appsv1beta1.PodSet {
		set := &appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: podSetName},
			Spec: appsv1beta1.PodSetSpec{Replicas: size, Template: template()}}
		if c.rollout {
			set.Spec.UpdateStrategy.RollingUpdate.MaxSurge, set.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = &surge, &unavailable
		}
		return set
	}

	foreign, orphan := podSetNeighbours(t, ns)

	want := c.to
	image := "busybox:1"
	if c.rollout {
		image = "busybox:2"
	}
	if c.from > 0 {
		stop := f.startPlain()
		env.Create(t, newSet(c.from))
		waitFor(t, "the initial PodSet to settle", func() error { return podSetSettled(ctx, key, c.from, "busybox:1") })
		stop()
	}

	bound := max(c.from, c.to)
	if c.rollout {
		bound += surge.IntVal
	}
	observe(t, podList(ns), podSetChecks(f, foreign, orphan, func() int32 { return bound }))

	var trigger []func() error
	switch {
	case c.from == 0:
		trigger = append(trigger, func() error { return ignoreExists(env.Client.Create(ctx, newSet(c.to))) })
	case c.rollout:
		trigger = append(trigger, func() error {
			set := &appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: podSetName}}
			return env.Update(set, func() { set.Spec.Template.Spec.Containers[0].Image = image })
		})
	default:
		trigger = append(trigger, func() error {
			set := &appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: podSetName}}
			return env.Update(set, func() { set.Spec.Replicas = c.to })
		})
	}
	return plan{
		trigger:   trigger,
		converged: func() error { return podSetSettled(ctx, key, want, image) },
		final:     func() {},
	}
}

// podSetNeighbours makes the pods a PodSet named podSetName in ns must leave
// alone (one with its label that another controller owns, one that it does
// not select), and plays the kubelet in ns until the test ends.
func podSetNeighbours(t *testing.T, ns string) (foreign, orphan *corev1.Pod) {
	foreign = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "foreign",
		Labels: map[string]string{appsv1beta1.PodSetLabel: podSetName},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: podSetName,
			UID: uuid.NewUUID(), Controller: new(true)}}}, Spec: podSpec()}
	orphan = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orphan",
		Labels: map[string]string{"app": podSetName}}, Spec: podSpec()}
	env.Create(t, foreign)
	env.Create(t, orphan)
	markRunning(t, ns)
	startKubelet(t, ns)
	return foreign, orphan
}

// podSetChecks checks the PodSet invariants on each event of a watch of
// its namespace's pods: checkPodSetBound with at most bound() live pods
// (read at each event: a scenario that scales twice raises it just before
// its second change), checkPodSetForeign and checkPodSetAdoption for the
// neighbours.
func podSetChecks(f *fixture, foreign, orphan *corev1.Pod, bound func() int32) func(watch.Event) {
	live := map[string]*corev1.Pod{}
	return func(ev watch.Event) {
		pod := ev.Object.(*corev1.Pod)
		if (ev.Type == watch.Deleted || pod.DeletionTimestamp != nil) && (pod.Name == foreign.Name || pod.Name == orphan.Name) {
			f.violate(checkPodSetForeign, "pod %s was deleted", pod.Name)
		}
		if ref := metav1.GetControllerOf(pod); pod.Name == foreign.Name && (ref == nil || ref.UID != foreign.OwnerReferences[0].UID) ||
			pod.Name == orphan.Name && ref != nil {
			f.violate(checkPodSetAdoption, "pod %s is now controlled by %v", pod.Name, ref)
		}
		if ev.Type == watch.Deleted || !ownedLive(pod) {
			delete(live, pod.Name)
		} else {
			live[pod.Name] = pod
		}
		if at := bound(); len(live) > int(at) {
			f.violate(checkPodSetBound, "%d live pods, at most %d allowed", len(live), at)
		}
	}
}

// podSetSettled is nil once the PodSet has exactly size live pods, all of
// image, and its status says so for its current generation.
func podSetSettled(ctx context.Context, key types.NamespacedName, size int32, image string) error {
	set := &appsv1beta1.PodSet{}
	if err := env.Client.Get(ctx, key, set); err != nil {
		return err
	}
	var pods corev1.PodList
	if err := env.Client.List(ctx, &pods, client.InNamespace(key.Namespace)); err != nil {
		return err
	}
	n := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		if !ownedLive(p) {
			continue
		}
		if p.Spec.Containers[0].Image != image {
			return fmt.Errorf("pod %s still runs %s", p.Name, p.Spec.Containers[0].Image)
		}
		n++
	}
	st := set.Status
	switch {
	case n != int(size):
		return fmt.Errorf("%d live pods, want %d", n, size)
	case st.ObservedGeneration != set.Generation:
		return fmt.Errorf("status describes generation %d of %d", st.ObservedGeneration, set.Generation)
	case st.Replicas != size || st.UpdatedReplicas != size || st.ReadyReplicas != size:
		return fmt.Errorf("status says %d replicas, %d updated, %d ready; want %d", st.Replicas, st.UpdatedReplicas, st.ReadyReplicas, size)
	}
	return nil
}

// ownedLive reports whether a PodSet controls pod and the pod counts
// towards its size: not being deleted, not finished.
func ownedLive(pod *corev1.Pod) bool {
	ref := metav1.GetControllerOf(pod)
	return ref != nil && ref.Kind == "PodSet" && ref.Name == podSetName && pod.DeletionTimestamp == nil &&
		pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// template is the pod template of the scenarios' PodSets and Jobs.
func template() *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"tier": "web"}}, Spec: podSpec()}
}

func podSpec() corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox:1", Command: []string{"sleep", "3600"}}}}
}

func podList(ns string) listWatch {
	return listWatch{
		list: func(ctx context.Context) (string, []runtime.Object, error) {
			l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return "", nil, err
			}
			return l.ResourceVersion, objects(l.Items), nil
		},
		watch: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().Pods(ns).Watch(ctx, opts)
		},
	}
}

// markRunning does what a kubelet would for every pod of ns not yet
// running: it runs and is ready. envtest has no kubelet (and no scheduler:
// pods stay unscheduled, so a delete removes them at once).
func markRunning(t *testing.T, ns string) {
	ctx := context.Background()
	var pods corev1.PodList
	if err := env.Client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		t.Logf("kubelet: listing pods: %v", err)
		return
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodRunning {
			continue
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		if err := env.Client.Status().Update(ctx, p); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			t.Logf("kubelet: %v", err)
		}
	}
}

// startKubelet runs markRunning every 100 ms until the test ends.
func startKubelet(t *testing.T, ns string) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				markRunning(t, ns)
			}
		}
	})
	inBackground(t, func() { close(done); wg.Wait() })
}
