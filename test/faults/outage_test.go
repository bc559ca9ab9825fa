//go:build faults

package faults_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	jobwatchercontroller "github.com/deckhand-dev/deckhand/internal/controller/jobwatcher"
	podsetcontroller "github.com/deckhand-dev/deckhand/internal/controller/podset"
	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/internal/testenv/faultinject"
)

// The fault class "the apiserver unreachable for longer than the cache's
// keep time, then back". While the manager cannot reach pods and Jobs, a
// read of a namespace whose informer cannot sync waits; an informer nothing
// needs is dropped after the keep time, and a reader waiting on it must be
// woken, not left holding a worker for good. Afterwards every controller
// must converge.
const checkNoHang = "no reconcile outlives the outage"

const (
	// outageKeep is the scoped cache's keep time in this scenario
	// (manager.Options.ScopedCacheKeepFor), 1 minute by default.
	outageKeep = 3 * time.Second
	// outageLength is how long pods and Jobs are unreachable: more than
	// twice the keep time.
	outageLength = 2*outageKeep + time.Second
)

func outageScenario() scenario {
	return scenario{name: "PodSets and a JobWatcher through a pods and Jobs outage",
		controllers: []string{podsetcontroller.ControllerName, jobwatchercontroller.ControllerName},
		// Each run lasts the outage and the controllers' backoff after it.
		costly: true, crashPoints: 6, start: outagePlan}
}

// outagePlan: a PodSet of 2 runs in namespace a beside a JobWatcher that
// deletes failed Jobs at once. Pods and Jobs become unreachable for the
// manager; meanwhile the PodSet grows to 4, a Job in a fails, a PodSet of
// 2 is made in b, and one in c is made and deleted again (its reconcile
// waits for c's informer, which cannot sync and which nothing needs once
// it is deleted). Then the apiserver is back.
func outagePlan(t *testing.T, f *fixture) plan {
	ctx := context.Background()
	f.opts.ScopedCacheKeepFor = outageKeep
	outage := faultinject.NewOutage("/pods", "/jobs")
	a, b, c := env.Namespace(t), env.Namespace(t), env.Namespace(t)
	foreign, orphan := podSetNeighbours(t, a)
	startKubelet(t, b)
	newSet := func(ns string, size int32) *appsv1beta1.PodSet {
		return &appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: podSetName},
			Spec: appsv1beta1.PodSetSpec{Replicas: size, Template: template()}}
	}
	watcher := &deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: a, Name: "w"}}
	watcher.Spec.TTLSecondsAfterFailed = ptr.To[int32](0)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: a, Name: "etl"},
		Spec: batchv1.JobSpec{Template: *template()}}
	job.Spec.Template.Spec.RestartPolicy = "Never"
	job.Spec.Template.Labels = nil

	stop := f.startPlain()
	env.Create(t, newSet(a, 2))
	env.Create(t, watcher)
	waitFor(t, "the PodSet and the JobWatcher in effect", func() error {
		if err := podSetSettled(ctx, types.NamespacedName{Namespace: a, Name: podSetName}, 2, "busybox:1"); err != nil {
			return err
		}
		return inEffect(ctx, watcher)
	})
	stop()

	observe(t, podList(a), podSetChecks(f, foreign, orphan, func() int32 { return 4 }))
	idle := newIdleWorkers(f, podsetcontroller.ControllerName, jobwatchercontroller.ControllerName)
	var began time.Time
	var jobUID atomicUID
	return plan{
		wrap: outage.Config,
		trigger: []func() error{
			func() error { time.Sleep(managerStarts); return nil },
			func() error { outage.Begin(); began = time.Now(); return nil },
			func() error {
				set := &appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: a, Name: podSetName}}
				return env.Update(set, func() { set.Spec.Replicas = 4 })
			},
			func() error { return ignoreExists(env.Client.Create(ctx, newSet(b, 2))) },
			func() error { return ignoreExists(env.Client.Create(ctx, newSet(c, 2))) },
			func() error {
				if err := ignoreExists(env.Client.Create(ctx, job)); err != nil {
					return err
				}
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
					return err
				}
				jobUID.Store(job.UID)
				if failed(job) {
					return nil
				}
				return finishErr(job, batchv1.JobFailed, time.Now().Add(-time.Minute))
			},
			func() error {
				time.Sleep(outageKeep / 2)
				return client.IgnoreNotFound(env.Client.Delete(ctx, newSet(c, 2)))
			},
			func() error {
				time.Sleep(time.Until(began.Add(outageLength)))
				outage.End()
				return nil
			},
		},
		converged: func() error {
			for ns, size := range map[string]int32{a: 4, b: 2} {
				if err := podSetSettled(ctx, types.NamespacedName{Namespace: ns, Name: podSetName}, size, "busybox:1"); err != nil {
					return fmt.Errorf("PodSet in %s: %w", ns, err)
				}
			}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("the failed Job is still there (%w)", err)
			}
			if err := recordsHeld(ctx, []client.Object{watcher}, map[types.UID]string{jobUID.Load(): job.Name}); err != nil {
				return err
			}
			return inEffect(ctx, watcher)
		},
		final: idle.check,
	}
}

// atomicUID is a UID the trigger learns and the convergence check reads.
type atomicUID struct {
	mu  sync.Mutex
	uid types.UID
}

func (a *atomicUID) Store(uid types.UID) { a.mu.Lock(); a.uid = uid; a.mu.Unlock() }

func (a *atomicUID) Load() types.UID { a.mu.Lock(); defer a.mu.Unlock(); return a.uid }

// idleWorkers checks that the controllers' reconciles all ended: once a
// run has converged and been quiet, controller-runtime's
// controller_runtime_active_workers is back where it was before the run
// (the gauge is the process's, shared by the managers it runs one after
// the other). A reconcile still waiting for a cache that will never sync
// holds a worker.
type idleWorkers struct {
	f           *fixture
	controllers []string
	before      map[string]float64
	read        func(controller string) (float64, error)
}

func newIdleWorkers(f *fixture, controllers ...string) *idleWorkers {
	w := &idleWorkers{f: f, controllers: controllers, before: map[string]float64{}, read: activeWorkers}
	for _, c := range controllers {
		n, err := w.read(c)
		if err != nil {
			f.t.Fatalf("reading the active workers: %v", err)
		}
		w.before[c] = n
	}
	return w
}

func activeWorkers(controller string) (float64, error) {
	return testenv.Metric("controller_runtime_active_workers", map[string]string{"controller": controller})
}

// check gives the reconciles a moment to end (a requeue's last one) and
// reports a controller whose workers are still busy.
func (w *idleWorkers) check() {
	deadline := time.Now().Add(idleWithin)
	for _, c := range w.controllers {
		for {
			n, err := w.read(c)
			if err == nil && n <= w.before[c] {
				break
			}
			if time.Now().After(deadline) {
				w.f.violate(checkNoHang, "%s: %v reconciles still running %s after it converged (%v before the run; %v)", c, n-w.before[c], idleWithin, w.before[c], err)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// idleWithin is how long after convergence a reconcile may still run.
const idleWithin = 5 * time.Second

// The idle check reports a controller with a worker still busy, and none
// whose workers came back.
func TestIdleCheckCatchesAWedgedWorker(t *testing.T) {
	f := &fixture{t: t}
	var mu sync.Mutex
	now := map[string]float64{"podset": 1, "jobwatcher": 0}
	w := &idleWorkers{f: f, controllers: []string{"podset", "jobwatcher"}, before: map[string]float64{"podset": 0, "jobwatcher": 0},
		read: func(c string) (float64, error) {
			mu.Lock()
			defer mu.Unlock()
			return now[c], nil
		}}
	began := time.Now()
	w.check()
	if len(f.violations) != 1 || f.violations[0].check != checkNoHang {
		t.Errorf("violations %v, want one of %q (podset)", f.violations, checkNoHang)
	}
	if time.Since(began) < idleWithin {
		t.Errorf("the check gave the worker %s, not %s", time.Since(began), idleWithin)
	}
}
