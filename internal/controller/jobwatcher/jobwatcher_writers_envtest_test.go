package jobwatcher_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	jobwatchercontroller "github.com/deckhand-dev/deckhand/internal/controller/jobwatcher"
	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/internal/testenv/faultinject"
)

// refuseWatcherStatus returns a copy of cfg through which every write of a
// JobWatcher's status fails: a failure record can never be saved.
func refuseWatcherStatus(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return faultinject.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodGet && strings.Contains(req.URL.Path, "/jobwatchers/") && strings.HasSuffix(req.URL.Path, "/status") {
				return nil, errors.New("fault injection: status write refused")
			}
			return rt.RoundTrip(req)
		})
	})
	return out
}

// A failed Job waits for its failure record to be in its watcher's status
// before it is deleted. When the watcher is deleted meanwhile, the Job is
// not deleted on the say of a watcher that no longer exists: it used to be
// released as if its record were saved, and deleted.
func TestDeletedWatcherDeletesNothingItHadPending(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	_, stop := env.StartManagerWithConfig(t, refuseWatcherStatus(env.Config), env.ManagerOptions())
	defer stop()
	w := jobWatcher(ns, "w", nil, i32(0))
	env.Create(t, w)
	job := createJob(t, newJob(ns, "etl"), batchv1.JobFailed, time.Now().Add(-time.Minute))

	// The deletion is waiting for the record (it cannot be written).
	time.Sleep(2 * time.Second)
	g.Expect(env.Exists(job)()).To(BeTrue())
	g.Expect(env.Client.Delete(ctx, w)).To(Succeed())
	g.Consistently(env.Exists(job)).WithTimeout(5*time.Second).Should(BeTrue(),
		"the Job was deleted on the say of a watcher that is gone")
}

// Another writer (a previous leader's late write, kubectl edit
// --subresource=status) replaces the status of a quiet watcher, dropping
// its failure records: the controller restores the status it computes,
// failure records included.
func TestStatusAnotherWriterChangedIsRestored(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	env.StartManager(t, env.ManagerOptions())
	w := jobWatcher(ns, "w", nil, i32(0))
	env.Create(t, w)
	job := createJob(t, newJob(ns, "etl"), batchv1.JobFailed, time.Now().Add(-time.Minute))
	g.Eventually(env.Exists(job)).Should(BeFalse())
	computed := And(
		HaveField("RecentFailures", ConsistOf(HaveField("UID", job.UID))),
		HaveField("MatchedJobs", BeZero()),
		HaveField("DeletedJobs", BeEquivalentTo(1)),
		HaveField("Conditions", testenv.HaveCondition(deckhandbatchv1.ConditionReady, metav1.ConditionTrue, deckhandbatchv1.ReasonActive)))
	g.Eventually(status(w)).Should(computed)
	time.Sleep(time.Second) // quiet: nothing more to write

	forged := w.DeepCopy()
	forged.Status.RecentFailures, forged.Status.MatchedJobs = nil, 99
	forged.Status.Conditions = []metav1.Condition{{Type: deckhandbatchv1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: "Forged", Message: "written by someone else", LastTransitionTime: metav1.Now()}}
	g.Expect(env.Client.Status().Update(ctx, forged)).To(Succeed())
	g.Eventually(status(w)).WithTimeout(10*time.Second).Should(computed, "another writer's status stayed")
}

// Whether a Job is beyond its watcher's history limit is judged on the
// cache, which may lag: here it still shows a newer Job that is gone, so
// the older one looks beyond a limit of 1 while it is within it. The
// deletion is confirmed on a list read past the cache, and the Job stays.
func TestHistoryDeletionIsConfirmedPastTheCache(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	w := jobWatcher(ns, "w", nil, nil)
	w.Spec.SuccessfulJobsHistoryLimit = i32(1)
	_, stop := env.StartManager(t, env.ManagerOptions()) // its webhook admits the watcher
	env.Create(t, w)
	stop()
	older := createJob(t, newJob(ns, "older"), batchv1.JobComplete, time.Now().Add(-time.Hour))
	newer := createJob(t, newJob(ns, "newer"), batchv1.JobComplete, time.Now().Add(-time.Minute))
	var stale batchv1.JobList
	g.Expect(env.Client.List(ctx, &stale, client.InNamespace(ns))).To(Succeed())
	g.Expect(env.Client.Delete(ctx, newer)).To(Succeed())

	cache := faultinject.StaleLists(env.Client, &stale)
	r := jobwatchercontroller.NewTestJobReconciler(cache, env.Client, nil, events.NewFakeRecorder(10))
	_, err := jobwatchercontroller.ReconcileSettled(ctx, r, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(older)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Exists(older)()).To(BeTrue(), "deleted for a history limit on a lagging cache's say")

	// With the cache caught up (the newer Job back), the older one goes.
	createJob(t, newJob(ns, "newest"), batchv1.JobComplete, time.Now())
	_, err = jobwatchercontroller.ReconcileSettled(ctx, r, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(older)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Exists(older)()).To(BeFalse())
}

// A manager starting over N finished Jobs under a watcher with a history
// limit judges each of them, and each judgement needs the namespace's
// history: computed from one list of the namespace while no Job of it
// changes, not from a list per Job (N² Jobs copied: minutes of CPU at
// 10,000 Jobs).
func TestHistoryIsListedOncePerNamespaceWhileNothingChanges(t *testing.T) {
	const jobs = 200
	g := testenv.NewG(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	w := jobWatcher(ns, "w", i32(3600), nil)
	w.Spec.SuccessfulJobsHistoryLimit = i32(1000)
	_, stop := env.StartManager(t, env.ManagerOptions()) // its webhook admits the watcher
	env.Create(t, w)
	stop()
	created := make([]*batchv1.Job, 0, jobs)
	for i := range jobs {
		created = append(created, createJob(t, newJob(ns, fmt.Sprintf("job-%03d", i)), batchv1.JobComplete, time.Now().Add(-time.Minute)))
	}
	lists := &jobwatchercontroller.JobLists{Client: env.Client}
	r := jobwatchercontroller.NewTestJobReconciler(lists, env.Client, nil, events.NewFakeRecorder(10))
	for _, job := range created {
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(job)})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.RequeueAfter).To(BeNumerically(">", 50*time.Minute), "%s is judged due in about an hour", job.Name)
	}
	g.Expect(lists.N.Load()).To(BeNumerically("<=", 1), "lists of the namespace's Jobs to judge %d Jobs", jobs)
}
