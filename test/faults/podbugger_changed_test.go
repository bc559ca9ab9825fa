//go:build faults

package faults_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	podbuggercontroller "github.com/deckhand-dev/deckhand/internal/controller/podbugger"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/policy"
	"github.com/deckhand-dev/deckhand/internal/testenv/faultinject"
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
	return scenario{name: "PodBugger suspended as pods start", controllers: []string{podbuggercontroller.ControllerName},
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

	stopped := &afterStop{f: f, patched: map[string]time.Time{}}
	observe(t, podList(ns), stopped.observe)
	return plan{
		wrap: stopped.wrap,
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
// was suspended, and reports every injection written after the suspend
// that no fresh read of the PodBugger excuses. resourceVersions are compared
// as numbers: what etcd's revisions are, and what the apiserver these tests
// run gives. Checked at the end, as the observer may see a pod's write
// before the test records the suspend.
//
// A manager that reads the PodBugger past its cache right before it injects
// can still race the suspend: the apiserver has no precondition across two
// objects, so a read that began before the suspend was written may show the
// PodBugger going, and the injection that follows commits after it (seen
// with flaky watches: two injections one revision after the suspend). That
// is the least any controller can do, and it is excused: the requests the
// manager sends are logged (wrap), and an injection after the suspend is a
// violation unless the last read of the PodBugger before it began before
// the suspend was written. A manager acting on its cache reads nothing.
type afterStop struct {
	f  *fixture
	mu sync.Mutex
	// stoppedAt is the suspend's revision, stoppedBy when its update came
	// back.
	stoppedAt int64
	stoppedBy time.Time
	added     map[string]int64 // pod name: the revision that added the debugger
	// reads are when the managers' reads of the PodBugger began; patched,
	// by pod, when the last request adding an ephemeral container to it was
	// sent.
	reads   []time.Time
	patched map[string]time.Time
}

func (a *afterStop) observe(ev watch.Event) {
	p, ok := ev.Object.(*corev1.Pod)
	if !ok || ev.Type == watch.Deleted {
		return
	}
	container := policy.ContainerName(podBuggerName)
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
	a.stoppedAt, a.stoppedBy = rv, time.Now()
}

// wrap logs the manager's reads of the PodBugger and its requests adding
// ephemeral containers.
func (a *afterStop) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return faultinject.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			a.request(req.Method, req.URL.Path, time.Now())
			return rt.RoundTrip(req)
		})
	})
	return cfg
}

func (a *afterStop) request(method, path string, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch parts := strings.Split(path, "/"); {
	case method == http.MethodGet && strings.HasSuffix(path, "/podbuggers/"+podBuggerName):
		a.reads = append(a.reads, at)
	case method != http.MethodGet && len(parts) > 2 && parts[len(parts)-1] == "ephemeralcontainers":
		a.patched[parts[len(parts)-2]] = at
	}
}

func (a *afterStop) check() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stoppedAt == 0 {
		a.f.violate("trigger", "the PodBugger was never suspended")
		return
	}
	for pod, rv := range a.added {
		if rv <= a.stoppedAt {
			continue
		}
		var read time.Time // the last read of the PodBugger begun before the request
		for _, r := range a.reads {
			if r.Before(a.patched[pod]) && r.After(read) {
				read = r
			}
		}
		if read.IsZero() || !read.Before(a.stoppedBy) {
			a.f.violate(checkPodBuggerStopped, "pod %s got the debugger at revision %d, after the suspend at %d, with no read of the PodBugger begun before the suspend", pod, rv, a.stoppedAt)
		}
	}
}

// The check reports an injection written after the suspend, and none
// written before it, whatever order the observer and the test saw them in.
func TestAfterStopCheckCatchesAnInjectionAfterTheSuspend(t *testing.T) {
	f := &fixture{t: t}
	a := &afterStop{f: f, patched: map[string]time.Time{}}
	t0 := time.Now()
	const pods = "/api/v1/namespaces/ns/pods/"
	a.carries("web-0", "100") // before the suspend
	a.request(http.MethodPatch, pods+"web-0/ephemeralcontainers", t0)
	// web-1: on the cache's word, no read of the PodBugger at all.
	a.request(http.MethodPatch, pods+"web-1/ephemeralcontainers", t0.Add(time.Second))
	a.carries("web-1", "160")
	// web-2: read before the suspend came back, the race no controller
	// can close: excused.
	a.request(http.MethodGet, "/apis/debug.deckhand.dev/v1beta1/namespaces/ns/podbuggers/"+podBuggerName, t0.Add(2*time.Second))
	a.stop("150")
	a.stoppedBy = t0.Add(3 * time.Second)
	a.request(http.MethodPatch, pods+"web-2/ephemeralcontainers", t0.Add(4*time.Second))
	a.carries("web-2", "161")
	// web-3: read after the suspend, injected anyway.
	a.request(http.MethodGet, "/apis/debug.deckhand.dev/v1beta1/namespaces/ns/podbuggers/"+podBuggerName, t0.Add(5*time.Second))
	a.request(http.MethodPatch, pods+"web-3/ephemeralcontainers", t0.Add(6*time.Second))
	a.carries("web-3", "170")
	a.carries("web-0", "171") // the same pod again: still added at 100
	a.check()
	var got []string
	for _, v := range f.violations {
		if v.check == checkPodBuggerStopped {
			got = append(got, v.detail[:len("pod web-1")])
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"pod web-1", "pod web-3"}) {
		t.Errorf("violations %v, want web-1 and web-3 reported", f.violations)
	}
}
