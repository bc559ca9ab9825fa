//go:build faults

package faults_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	podbuggercontroller "github.com/deckhand-dev/deckhand/internal/controller/podbugger"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/policy"
)

// The PodBugger invariants.
const (
	checkPodBuggerMaxPods   = "never more than maxPods pods carry the debugger"
	checkPodBuggerTwice     = "never two debuggers in one pod"
	checkPodBuggerNamespace = "never a pod outside an opted-in namespace"
	checkPodBuggerSelector  = "never a pod its selector does not match"
)

const (
	podBuggerName  = "dbg"
	podBuggerImage = "docker.io/library/busybox:1.37"
	maxPods        = 3
)

func init() { scenariosOf(podbuggercontroller.ControllerName, podBuggerScenarios) }

func podBuggerScenarios() []scenario {
	return []scenario{{name: "PodBugger inject into 3 of 5 pods", controllers: []string{podbuggercontroller.ControllerName},
		staleCrashes: true, start: podBuggerPlan}, podBuggerAllowListScenario(), podBuggerSuspendedScenario(), podBuggerIncidentScenario()}
}

// podBuggerPlan: five matching pods and one that does not match in an
// opted-in namespace, where the trigger creates a PodBugger with maxPods 3;
// two matching pods in a namespace that opted out after its PodBugger was
// admitted.
func podBuggerPlan(t *testing.T, f *fixture) plan {
	ctx := context.Background()
	f.opts.PodBuggerAllowedImages = []string{"docker.io/library/busybox:*"}
	on := env.NamespaceWithLabels(t, map[string]string{debugv1beta1.NamespaceEnabledLabel: "true"})
	off := env.NamespaceWithLabels(t, map[string]string{debugv1beta1.NamespaceEnabledLabel: "true"})
	newPodBugger := func(ns string) *debugv1beta1.PodBugger {
		return &debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: podBuggerName},
			Spec: debugv1beta1.PodBuggerSpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Image: podBuggerImage, MaxPods: maxPods}}
	}

	// The namespace opts out once its PodBugger is admitted.
	stop := f.startPlain()
	env.Create(t, newPodBugger(off))
	stop()
	nsOff := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: off}}
	if err := env.Update(nsOff, func() { delete(nsOff.Labels, debugv1beta1.NamespaceEnabledLabel) }); err != nil {
		t.Fatalf("opting %s out: %v", off, err)
	}

	pod := func(ns, name, app string) {
		env.Create(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}},
			Spec: podSpec()})
	}
	for i := range 5 {
		pod(on, fmt.Sprintf("web-%d", i), "web")
	}
	pod(on, "other", "other")
	pod(off, "web-0", "web")
	pod(off, "web-1", "web")
	markRunning(t, on)
	markRunning(t, off)

	carriers := map[types.NamespacedName]bool{}
	check := carrierChecks(f, on, off, carriers)
	for _, ns := range []string{on, off} {
		observe(t, podList(ns), check)
	}

	return plan{
		trigger: []func() error{func() error { return ignoreExists(env.Client.Create(ctx, newPodBugger(on))) }},
		converged: func() error {
			var pods corev1.PodList
			if err := env.Client.List(ctx, &pods, client.InNamespace(on)); err != nil {
				return err
			}
			n := 0
			for _, p := range pods.Items {
				if len(p.Spec.EphemeralContainers) > 0 {
					n++
				}
			}
			pb := &debugv1beta1.PodBugger{}
			if err := env.Client.Get(ctx, types.NamespacedName{Namespace: on, Name: podBuggerName}, pb); err != nil {
				return err
			}
			if n != maxPods || pb.Status.Installed != maxPods {
				return fmt.Errorf("%d pods carry the debugger, status says %d; want %d", n, pb.Status.Installed, maxPods)
			}
			return nil
		},
		final: func() {},
	}
}

// carrierChecks checks each pod event of the two namespaces: carriers holds
// the pods that carry the debugger. The two namespaces' observers call it
// from their own goroutines.
func carrierChecks(f *fixture, on, off string, carriers map[types.NamespacedName]bool) func(watch.Event) {
	container := policy.ContainerName(podBuggerName)
	var mu sync.Mutex
	return func(ev watch.Event) {
		mu.Lock()
		defer mu.Unlock()
		p := ev.Object.(*corev1.Pod)
		key := client.ObjectKeyFromObject(p)
		n := 0
		for _, c := range p.Spec.EphemeralContainers {
			if c.Name == container || c.Image == podBuggerImage {
				n++
			}
		}
		if n > 1 {
			f.violate(checkPodBuggerTwice, "pod %s carries %d debuggers", key, n)
		}
		if ev.Type == watch.Deleted || n == 0 {
			delete(carriers, key)
			return
		}
		carriers[key] = true
		switch {
		case p.Namespace == off:
			f.violate(checkPodBuggerNamespace, "pod %s carries the debugger", key)
		case p.Labels["app"] != "web":
			f.violate(checkPodBuggerSelector, "pod %s carries the debugger", key)
		}
		inOn := 0
		for k := range carriers {
			if k.Namespace == on {
				inOn++
			}
		}
		if inOn > maxPods {
			f.violate(checkPodBuggerMaxPods, "%d pods carry the debugger, maxPods is %d", inOn, maxPods)
		}
	}
}
