package jobwatcher_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	jobwatchercontroller "github.com/deckhand-dev/deckhand/internal/controller/jobwatcher"
	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/internal/testenv/faultinject"
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

	r := jobwatchercontroller.NewStatusReconciler(faultinject.LoseStatusResponses(env.Client, 1), nil, events.NewFakeRecorder(100), false, nil, nil)
	now := time.Now()
	r.Now = func() time.Time { now = now.Add(jobwatchercontroller.StatusInterval); return now } // no coalescing
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)}
	jobwatchercontroller.RecordDeletion(ctx, r, w)
	jobwatchercontroller.RecordDeletion(ctx, r, w)
	_, err := r.Reconcile(ctx, req)
	g.Expect(err).To(MatchError(faultinject.ErrResponseLost))
	g.Expect(status(w)()).To(HaveField("DeletedJobs", BeEquivalentTo(2)), "the lost write landed")

	// Retried, it adds nothing: the status it reads back counts both.
	_, err = r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status(w)()).To(HaveField("DeletedJobs", BeEquivalentTo(2)))
	jobwatchercontroller.RecordDeletion(ctx, r, w)
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
	r := jobwatchercontroller.NewStatusReconciler(env.Client, nil, events.NewFakeRecorder(100), false, nil, nil)
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)}
	jobwatchercontroller.RecordDeletion(ctx, r, w)
	_, err := r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(jobwatchercontroller.Tallies(r)).To(Equal(1))
	g.Expect(jobwatchercontroller.Evaluations(r)).To(Equal(1))

	g.Expect(env.Client.Delete(ctx, w)).To(Succeed())
	g.Eventually(series).Should(BeZero())
	_, err = r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(jobwatchercontroller.Tallies(r)).To(BeZero())
	g.Expect(jobwatchercontroller.Evaluations(r)).To(BeZero())
}

// A ClusterJobWatcher's status does not re-list and re-judge every Job it
// reaches on every Job event: the events of one StatusInterval are
// coalesced into one evaluation, which the requeue brings.
func TestClusterStatusCoalescesJobEvents(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	env.StartManager(t, env.ManagerOptions()) // for the webhook
	w := clusterJobWatcher(t, i32(3600), nil, ns)
	env.Create(t, w)

	c := &jobListCounter{Client: env.Client}
	r := jobwatchercontroller.NewStatusReconciler(c, nil, events.NewFakeRecorder(100), true, nil, nil)
	now := time.Now()
	r.Now = func() time.Time { return now }
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)}
	for i := range 20 {
		createJob(t, newJob(ns, fmt.Sprintf("job-%02d", i)), batchv1.JobComplete, now)
		// What the Job's event brings.
		res, err := r.Reconcile(ctx, req)
		g.Expect(err).NotTo(HaveOccurred())
		if i > 0 {
			g.Expect(res.RequeueAfter).To(BeNumerically("~", jobwatchercontroller.StatusInterval, time.Millisecond), "coalesced, not dropped")
		}
	}
	g.Expect(c.lists()).To(Equal(1), "Job lists for 20 Job events in one interval")

	now = now.Add(jobwatchercontroller.StatusInterval)
	_, err := r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.lists()).To(Equal(2))
	g.Expect(status(w)()).To(And(HaveField("MatchedJobs", BeEquivalentTo(20)), HaveField("PendingDeletions", BeEquivalentTo(20))))
}

// jobListCounter counts the Job lists sent through it.
type jobListCounter struct {
	client.Client
	mu sync.Mutex
	n  int
}

func (c *jobListCounter) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*batchv1.JobList); ok {
		c.mu.Lock()
		c.n++
		c.mu.Unlock()
	}
	return c.Client.List(ctx, list, opts...)
}

func (c *jobListCounter) lists() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// deckhand_jobwatcher_expired_jobs counts the Jobs a watcher should have
// deleted by now and has not, what the DeckhandJobWatcherExpiredJobs alert
// watches; and goes with the watcher.
func TestExpiredJobsAreCounted(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	_, stop := env.StartManager(t, env.ManagerOptions()) // for the webhook
	w := jobWatcher(ns, "w", i32(3600), nil)
	env.Create(t, w)
	job := createJob(t, newJob(ns, "pi"), batchv1.JobComplete, time.Now())
	g.Eventually(status(w)).Should(HaveField("PendingDeletions", BeEquivalentTo(1)))
	// From here on only the test's reconciler, two hours later, reports:
	// the Job is then an hour past its TTL, and nothing deletes it.
	stop()
	r := jobwatchercontroller.NewStatusReconciler(env.Client, nil, events.NewFakeRecorder(100), false, nil, nil)
	now := time.Now().Add(2 * time.Hour)
	r.Now = func() time.Time { now = now.Add(jobwatchercontroller.StatusInterval); return now }
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)}
	labels := map[string]string{"watcher_kind": "JobWatcher", "watcher_namespace": ns, "watcher": "w"}
	expired := func() (float64, error) { return testenv.Metric("deckhand_jobwatcher_expired_jobs", labels) }

	_, err := r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(expired()).To(Equal(1.0))

	g.Expect(env.Client.Delete(ctx, job, client.PropagationPolicy("Background"))).To(Succeed())
	g.Eventually(env.Exists(job)).Should(BeFalse())
	_, err = r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(expired()).To(BeZero())
	g.Expect(testenv.MetricSeries("deckhand_jobwatcher_expired_jobs", labels)).To(Equal(1))

	g.Expect(env.Client.Delete(ctx, w)).To(Succeed())
	g.Eventually(env.Exists(w)).Should(BeFalse())
	_, err = r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(testenv.MetricSeries("deckhand_jobwatcher_expired_jobs", labels)).To(BeZero())
}
