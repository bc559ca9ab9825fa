//go:build faults

package faults_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	jobwatchercontroller "github.com/deckhand-dev/deckhand/internal/controller/jobwatcher"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// jobRole is what a scenario expects of a Job: due (must be deleted), or
// the invariant its deletion would break.
type jobRole string

const (
	roleDue     jobRole = "every due Job is deleted"
	roleRunning jobRole = "never deletes a running Job"
	roleTTL     jobRole = "never deletes a Job before every matching TTL has passed"
	roleReach   jobRole = "never deletes a Job outside its reach"
	roleKept    jobRole = "never deletes a Job kept by annotation"
	roleHistory jobRole = "never deletes a Job within its history limit"

	checkFailureRecords = "failure records are never lost"
)

// jobCase is one Job of a scenario.
type jobCase struct {
	ns, name    string // ns is "a" or "b", the scenario's two namespaces
	finished    batchv1.JobConditionType
	ago         time.Duration
	annotations map[string]string
	role        jobRole
}

func jobWatcherScenarios() []scenario {
	due := []jobCase{
		{ns: "a", name: "batch-succeeded", finished: batchv1.JobComplete, ago: time.Minute, role: roleDue},
		{ns: "a", name: "batch-failed", finished: batchv1.JobFailed, ago: time.Minute, role: roleDue},
		{ns: "a", name: "batch-running", role: roleRunning},
		{ns: "a", name: "batch-finishing", role: roleDue}, // the trigger finishes it
		{ns: "a", name: "batch-kept", finished: batchv1.JobComplete, ago: time.Minute, role: roleKept,
			annotations: map[string]string{deckhandbatchv1.KeepAnnotation: "true"}},
		{ns: "a", name: "batch-annotated", finished: batchv1.JobComplete, ago: time.Minute, role: roleTTL,
			annotations: map[string]string{deckhandbatchv1.TTLAnnotation: "1h"}},
		{ns: "a", name: "batch-later", finished: batchv1.JobComplete, ago: time.Minute, role: roleTTL}, // a second watcher keeps it 1h
		{ns: "a", name: "other-succeeded", finished: batchv1.JobComplete, ago: time.Minute, role: roleReach},
		{ns: "b", name: "batch-succeeded", finished: batchv1.JobComplete, ago: time.Minute, role: roleReach},
	}
	history := []jobCase{
		{ns: "a", name: "s-1", finished: batchv1.JobComplete, ago: 4 * time.Minute, role: roleDue},
		{ns: "a", name: "s-2", finished: batchv1.JobComplete, ago: 3 * time.Minute, role: roleDue},
		{ns: "a", name: "s-3", finished: batchv1.JobComplete, ago: 2 * time.Minute, role: roleHistory},
		{ns: "a", name: "s-4", finished: batchv1.JobComplete, ago: time.Minute, role: roleHistory},
		{ns: "a", name: "f-1", finished: batchv1.JobFailed, ago: 3 * time.Minute, role: roleDue},
		{ns: "a", name: "f-2", finished: batchv1.JobFailed, ago: 2 * time.Minute, role: roleDue},
		{ns: "a", name: "f-3", finished: batchv1.JobFailed, ago: time.Minute, role: roleHistory},
	}
	cluster := []jobCase{
		{ns: "a", name: "batch-succeeded", finished: batchv1.JobComplete, ago: time.Minute, role: roleDue},
		{ns: "a", name: "batch-failed", finished: batchv1.JobFailed, ago: time.Minute, role: roleDue},
		{ns: "a", name: "batch-running", role: roleRunning},
		{ns: "a", name: "batch-kept", finished: batchv1.JobComplete, ago: time.Minute, role: roleKept,
			annotations: map[string]string{deckhandbatchv1.KeepAnnotation: "true"}},
		{ns: "a", name: "batch-local", finished: batchv1.JobComplete, ago: time.Minute, role: roleTTL}, // its namespace's JobWatcher keeps it 1h
		{ns: "b", name: "batch-succeeded", finished: batchv1.JobComplete, ago: time.Minute, role: roleReach},
	}
	controllers := []string{jobwatchercontroller.ControllerName}
	return []scenario{
		{name: "JobWatcher Jobs finishing and due", controllers: controllers, start: func(t *testing.T, f *fixture) plan {
			return jobWatcherPlan(t, f, due, func(nss map[string]string) []client.Object {
				a := nss["a"]
				long := &deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: a, Name: "long"}}
				long.Spec.TTLSecondsAfterSucceeded = ptr.To[int32](3600)
				long.Spec.JobNamePatterns = []string{"batch-later"}
				w := &deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: a, Name: "w"}}
				w.Spec.TTLSecondsAfterSucceeded, w.Spec.TTLSecondsAfterFailed = ptr.To[int32](0), ptr.To[int32](0)
				w.Spec.JobNamePatterns = []string{"batch-.*"}
				return []client.Object{long, w} // long first: batch-later is never w's alone
			})
		}},
		{name: "JobWatcher history limits", controllers: controllers, start: func(t *testing.T, f *fixture) plan {
			return jobWatcherPlan(t, f, history, func(nss map[string]string) []client.Object {
				h := &deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: nss["a"], Name: "h"}}
				h.Spec.TTLSecondsAfterSucceeded, h.Spec.TTLSecondsAfterFailed = ptr.To[int32](3600), ptr.To[int32](3600)
				h.Spec.SuccessfulJobsHistoryLimit, h.Spec.FailedJobsHistoryLimit = ptr.To[int32](2), ptr.To[int32](1)
				return []client.Object{h}
			})
		}},
		{name: "ClusterJobWatcher across namespaces", controllers: controllers, start: func(t *testing.T, f *fixture) plan {
			return jobWatcherPlan(t, f, cluster, func(nss map[string]string) []client.Object {
				local := &deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: nss["a"], Name: "local"}}
				local.Spec.TTLSecondsAfterSucceeded = ptr.To[int32](3600)
				local.Spec.JobNamePatterns = []string{"batch-local"}
				cw := &deckhandbatchv1.ClusterJobWatcher{ObjectMeta: metav1.ObjectMeta{Name: "faults-" + nss["a"]}}
				cw.Spec.TTLSecondsAfterSucceeded, cw.Spec.TTLSecondsAfterFailed = ptr.To[int32](0), ptr.To[int32](0)
				cw.Spec.NamespacePatterns = []string{regexp.QuoteMeta(nss["a"])}
				return []client.Object{local, cw} // the namespace's own watcher comes first in precedence
			})
		}},
	}
}

// jobWatcherPlan creates the Jobs of cases in two namespaces, and has the
// trigger create the watchers (in order, each once the one before is in
// effect) and then finish batch-finishing.
func jobWatcherPlan(t *testing.T, f *fixture, cases []jobCase, watchers func(nss map[string]string) []client.Object) plan {
	ctx := context.Background()
	nss := map[string]string{"a": env.Namespace(t), "b": env.Namespace(t)}
	roles := map[types.NamespacedName]jobCase{}
	now := time.Now()
	for _, c := range cases {
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: nss[c.ns], Name: c.name, Annotations: c.annotations},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}}}
		env.Create(t, job)
		if c.finished != "" {
			finish(t, job, c.finished, now.Add(-c.ago))
		}
		roles[client.ObjectKeyFromObject(job)] = c
	}

	// Deleted failed Jobs, by UID: each must leave a failure record.
	deletedFailed := map[types.UID]string{}
	for _, ns := range nss {
		observe(t, jobList(ns), jobChecks(f, roles, deletedFailed))
	}
	mu := &f.mu

	ws := watchers(nss)
	for _, w := range ws {
		if w.GetNamespace() == "" {
			t.Cleanup(func() { _ = env.Client.Delete(context.Background(), w) })
		}
	}
	var trigger []func() error
	for i, w := range ws {
		if i > 0 {
			before := ws[i-1]
			trigger = append(trigger, func() error { return inEffect(ctx, before) })
		}
		trigger = append(trigger, func() error {
			obj, _ := w.DeepCopyObject().(client.Object)
			return ignoreExists(env.Client.Create(ctx, obj))
		})
	}
	if slices.ContainsFunc(cases, func(c jobCase) bool { return c.name == "batch-finishing" }) {
		trigger = append(trigger, func() error {
			job := &batchv1.Job{}
			if err := env.Client.Get(ctx, types.NamespacedName{Namespace: nss["a"], Name: "batch-finishing"}, job); err != nil {
				return err
			}
			if failed(job) || completed(job) {
				return nil
			}
			return finishErr(job, batchv1.JobComplete, time.Now())
		})
	}
	return plan{
		trigger:   trigger,
		converged: func() error { return dueJobsGone(ctx, roles) },
		final: func() {
			mu.Lock()
			want := maps.Clone(deletedFailed)
			mu.Unlock()
			// Every watcher of the scenario records at most 5 failures; the
			// scenarios delete fewer failed Jobs than that.
			var err error
			deadline := time.Now().Add(testenv.Timeout)
			for {
				if err = recordsHeld(ctx, ws, want); err == nil || time.Now().After(deadline) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				f.violate(checkFailureRecords, "%v", err)
			}
		},
	}
}

// recordsHeld is nil once the watchers' status.recentFailures hold a record
// of every Job in want (UID to name).
func recordsHeld(ctx context.Context, ws []client.Object, want map[types.UID]string) error {
	held := map[types.UID]bool{}
	for _, w := range ws {
		st, _, err := watcherStatus(ctx, w)
		if err != nil {
			return err
		}
		for _, r := range st.RecentFailures {
			held[r.UID] = true
		}
	}
	var missing []string
	for uid, name := range want {
		if !held[uid] {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("failed Jobs %v were deleted and no watcher's status.recentFailures records them", missing)
	}
	return nil
}

// inEffect is nil once the watcher's status shows its generation: the
// documented sign that the controller acts on it.
func inEffect(ctx context.Context, w client.Object) error {
	st, generation, err := watcherStatus(ctx, w)
	if err != nil {
		return err
	}
	if generation == 0 || st.ObservedGeneration != generation {
		return errors.New("watcher " + w.GetName() + " not in effect yet")
	}
	return nil
}

// watcherStatus reads a watcher of either kind afresh: its status and
// generation.
func watcherStatus(ctx context.Context, w client.Object) (deckhandbatchv1.JobWatcherStatus, int64, error) {
	got, _ := w.DeepCopyObject().(client.Object)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(w), got); err != nil {
		return deckhandbatchv1.JobWatcherStatus{}, 0, err
	}
	switch o := got.(type) {
	case *deckhandbatchv1.JobWatcher:
		return o.Status, o.Generation, nil
	case *deckhandbatchv1.ClusterJobWatcher:
		return o.Status, o.Generation, nil
	}
	return deckhandbatchv1.JobWatcherStatus{}, 0, fmt.Errorf("not a watcher: %T", w)
}

func failed(job *batchv1.Job) bool    { return hasCondition(job, batchv1.JobFailed) }
func completed(job *batchv1.Job) bool { return hasCondition(job, batchv1.JobComplete) }

func hasCondition(job *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// finish marks job finished at the given time, as the Job controller would
// (envtest runs none): Complete after SuccessCriteriaMet, or Failed after
// FailureTarget.
func finish(t *testing.T, job *batchv1.Job, how batchv1.JobConditionType, at time.Time) {
	t.Helper()
	if err := finishErr(job, how, at); err != nil {
		t.Fatalf("finishing Job %s: %v", job.Name, err)
	}
}

func finishErr(job *batchv1.Job, how batchv1.JobConditionType, at time.Time) error {
	testenv.FinishJob(job, how, at)
	return env.Client.Status().Update(context.Background(), job)
}

func jobList(ns string) listWatch {
	return listWatch{
		list: func(ctx context.Context) (string, []runtime.Object, error) {
			l, err := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return "", nil, err
			}
			return l.ResourceVersion, objects(l.Items), nil
		},
		watch: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return cs.BatchV1().Jobs(ns).Watch(ctx, opts)
		},
	}
}

// jobChecks checks each Job event against the Job's role, and notes the
// failed Jobs deleted (under f.mu) in deletedFailed.
func jobChecks(f *fixture, roles map[types.NamespacedName]jobCase, deletedFailed map[types.UID]string) func(watch.Event) {
	return func(ev watch.Event) {
		job := ev.Object.(*batchv1.Job)
		if ev.Type != watch.Deleted && job.DeletionTimestamp == nil {
			return
		}
		c := roles[client.ObjectKeyFromObject(job)]
		if c.role != roleDue {
			f.violate(string(c.role), "Job %s/%s was deleted", job.Namespace, job.Name)
		}
		if failed(job) {
			f.mu.Lock()
			deletedFailed[job.UID] = job.Name
			f.mu.Unlock()
		}
	}
}

// dueJobsGone is nil once every due Job of roles is gone.
func dueJobsGone(ctx context.Context, roles map[types.NamespacedName]jobCase) error {
	for key, c := range roles {
		if c.role != roleDue {
			continue
		}
		if err := env.Client.Get(ctx, key, &batchv1.Job{}); err == nil {
			return fmt.Errorf("due Job %s is still there", key)
		} else if client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}
