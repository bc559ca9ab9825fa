package batch_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	batchcontroller "github.com/deckhand-dev/deckhand/internal/controller/batch"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// status.deletedJobs counts each deletion once, also when the status write
// that counted it reached the apiserver but its response was lost, so that
// the controller cannot tell whether it landed.
func TestDeletedJobsCountsEachDeletionOnce(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	env.StartManager(t, env.ManagerOptions()) // for the webhook
	w := jobWatcher(ns, "w", i32(60), nil)
	env.Create(t, w)
	g.Eventually(status(w)).Should(HaveField("ObservedGeneration", w.Generation))

	r := batchcontroller.NewStatusReconciler(testenv.LoseStatusResponses(env.Client, 1), false)
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)}
	batchcontroller.RecordDeletion(ctx, r, w)
	batchcontroller.RecordDeletion(ctx, r, w)
	_, err := r.Reconcile(ctx, req)
	g.Expect(err).To(MatchError(testenv.ErrResponseLost))
	g.Expect(status(w)()).To(HaveField("DeletedJobs", BeEquivalentTo(2)), "the lost write landed")

	// Retried, it adds nothing: the status it reads back counts both.
	_, err = r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status(w)()).To(HaveField("DeletedJobs", BeEquivalentTo(2)))
	batchcontroller.RecordDeletion(ctx, r, w)
	_, err = r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status(w)()).To(HaveField("DeletedJobs", BeEquivalentTo(3)))
}

// A watcher that goes takes its metric series and the counts kept in memory
// for it along.
func TestAWatcherThatGoesIsForgotten(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	env.StartManager(t, env.ManagerOptions())
	w := jobWatcher(ns, "w", i32(0), nil)
	env.Create(t, w)
	job := createJob(t, newJob(ns, "pi"), batchv1.JobComplete, time.Now().Add(-time.Minute))
	g.Eventually(env.Exists(job)).Should(BeFalse())
	series := func() (int, error) {
		return testenv.MetricSeries("deckhand_jobwatcher_jobs_deleted_total",
			map[string]string{"watcher_kind": "JobWatcher", "watcher_namespace": ns, "watcher": "w"})
	}
	g.Eventually(series).Should(Equal(1))

	// The in-memory counts, on a status reconciler of the test's own.
	r := batchcontroller.NewStatusReconciler(env.Client, false)
	batchcontroller.RecordDeletion(ctx, r, w)
	g.Expect(batchcontroller.Tallies(r)).To(Equal(1))

	g.Expect(env.Client.Delete(ctx, w)).To(Succeed())
	g.Eventually(series).Should(BeZero())
	_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(batchcontroller.Tallies(r)).To(BeZero())
}
