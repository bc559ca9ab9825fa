//go:build faults

package faults_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	debugcontroller "github.com/deckhand-dev/deckhand/internal/controller/debug"
)

// checkPodBuggerStopped: the fault class "the object of record changes
// mid-action". An ephemeral container can never be removed, so none may be
// added after the PodBugger that asks for it said stop, whatever the
// manager's cache still shows.
const checkPodBuggerStopped = "no injection after its PodBugger was suspended"

// podBuggerSuspendedScenario: a PodBugger carried by two running pods; three
// more matching pods start, and the PodBugger is suspended right after. A
// cache behind the apiserver shows the new pods before the suspend. What
// was injected before the suspend stays; nothing may be injected after it.
func podBuggerSuspendedScenario() scenario {
	return scenario{name: "PodBugger suspended as pods start", controllers: []string{debugcontroller.ControllerName},
		start: podBuggerSuspendedPlan}
}

func podBuggerSuspendedPlan(t *testing.T, f *fixture) plan {
	ctx := context.Background()
	f.opts.PodBuggerAllowedImages = []string{"docker.io/library/busybox:*"}
	ns := env.NamespaceWithLabels(t, map[string]string{debugv1beta1.NamespaceEnabledLabel: "true"})
	newPod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "web"}},
			Spec: podSpec()}
	}
	for i := range 2 {
		env.Create(t, newPod(fmt.Sprintf("web-%d", i)))
	}
	markRunning(t, ns)
	key := types.NamespacedName{Namespace: ns, Name: podBuggerName}
	stop := f.startPlain()
	env.Create(t, &debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: podBuggerName},
		Spec: debugv1beta1.PodBuggerSpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Image: podBuggerImage, MaxPods: 5}})
	waitFor(t, "the PodBugger in two pods", func() error {
		pb := &debugv1beta1.PodBugger{}
		if err := env.Client.Get(ctx, key, pb); err != nil {
			return err
		}
		if pb.Status.Installed != 2 {
			return fmt.Errorf("installed in %d pods", pb.Status.Installed)
		}
		return nil
	})
	stop()

	stopped := &afterStop{f: f}
	observe(t, podList(ns), stopped.observe)
	return plan{
		trigger: []func() error{
			func() error {
				// Once the manager's caches have listed: the change must
				// reach it through its (lagging) watches.
				time.Sleep(managerStarts)
				return nil
			},
			func() error {
				for i := 2; i < 5; i++ {
					pod := newPod(fmt.Sprintf("web-%d", i))
					if err := ignoreExists(env.Client.Create(ctx, pod)); err != nil {
						return err
					}
					if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
						return err
					}
					pod.Status.Phase = corev1.PodRunning
					if err := env.Client.Status().Update(ctx, pod); err != nil {
						return err
					}
				}
				return nil
			},
			func() error {
				pb := &debugv1beta1.PodBugger{}
				if err := env.Client.Get(ctx, key, pb); err != nil {
					return err
				}
				pb.Spec.Suspend = true
				if err := env.Client.Update(ctx, pb); err != nil {
					return err
				}
				stopped.stop(pb.ResourceVersion)
				return nil
			},
		},
		converged: func() error {
			pb := &debugv1beta1.PodBugger{}
			if err := env.Client.Get(ctx, key, pb); err != nil {
				return err
			}
			if !pb.Spec.Suspend || pb.Status.ObservedGeneration != pb.Generation {
				return fmt.Errorf("status of generation %d, PodBugger at %d (suspended: %v)", pb.Status.ObservedGeneration, pb.Generation, pb.Spec.Suspend)
			}
			return nil
		},
		final: stopped.check,
	}
}

// managerStarts is how long a manager takes, here, to list what its caches
// hold once started.
const managerStarts = 2 * time.Second

// afterStop records when each pod first carried the debugger (the
// resourceVersion of the pod's write that added it) and when the PodBugger
// was suspended, and reports every injection written after the suspend.
// resourceVersions are compared as numbers: what etcd's revisions are, and
// what the apiserver these tests run gives. Checked at the end, as the
// observer may see a pod's write before the test records the suspend.
type afterStop struct {
	f         *fixture
	mu        sync.Mutex
	stoppedAt int64
	added     map[string]int64 // pod name: the revision that added the debugger
}

func (a *afterStop) observe(ev watch.Event) {
	p, ok := ev.Object.(*corev1.Pod)
	if !ok || ev.Type == watch.Deleted {
		return
	}
	container := debugcontroller.ContainerName(podBuggerName)
	for _, c := range p.Spec.EphemeralContainers {
		if c.Name == container {
			a.carries(p.Name, p.ResourceVersion)
		}
	}
}

func (a *afterStop) carries(pod, resourceVersion string) {
	rv, _ := strconv.ParseInt(resourceVersion, 10, 64)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.added == nil {
		a.added = map[string]int64{}
	}
	if _, seen := a.added[pod]; !seen {
		a.added[pod] = rv
	}
}

func (a *afterStop) stop(resourceVersion string) {
	rv, _ := strconv.ParseInt(resourceVersion, 10, 64)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stoppedAt = rv
}

func (a *afterStop) check() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stoppedAt == 0 {
		a.f.violate("trigger", "the PodBugger was never suspended")
		return
	}
	for pod, rv := range a.added {
		if rv > a.stoppedAt {
			a.f.violate(checkPodBuggerStopped, "pod %s got the debugger at revision %d, after the suspend at %d", pod, rv, a.stoppedAt)
		}
	}
}

// The check reports an injection written after the suspend, and none
// written before it, whatever order the observer and the test saw them in.
func TestAfterStopCheckCatchesAnInjectionAfterTheSuspend(t *testing.T) {
	f := &fixture{t: t}
	a := &afterStop{f: f}
	a.carries("web-0", "100")
	a.carries("web-1", "160")
	a.stop("150")
	a.carries("web-0", "170") // the same pod again: still added at 100
	a.check()
	if len(f.violations) != 1 || f.violations[0].check != checkPodBuggerStopped {
		t.Errorf("violations %v, want one of %q (web-1)", f.violations, checkPodBuggerStopped)
	}
}
