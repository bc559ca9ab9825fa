package jobwatcher_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	jobwatchercontroller "github.com/deckhand-dev/deckhand/internal/controller/jobwatcher"
	"github.com/deckhand-dev/deckhand/internal/scopedcache"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// noJobLists is the manager's client with its lists of Jobs refused.
type noJobLists struct{ client.Client }

func (c noJobLists) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*batchv1.JobList); ok {
		return errors.New("listed every Job of a namespace at once")
	}
	return c.Client.List(ctx, list, opts...)
}

// The passes over a namespace's Jobs read them from the cache one at a
// time (the status's counts, the history limits, a watcher's reach), never
// as a list: a list is every Job of the namespace expanded from the
// cache's compact form at once, and at 100,000 Jobs two such lists at a
// start took the manager's RSS to 841 MiB for a live heap of 130 MiB
// (docs/dev-log/performance.md, the scale rows). Seen failing with the lists back:
// each pass below failed, or found no Job.
func TestJobPassesReadTheCacheOneJobAtATime(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	opts := env.ManagerOptions()
	opts.WatchNamespaces = []string{ns}
	mgr, _ := env.StartManager(t, opts)
	w := jobWatcher(ns, "w", i32(3600), i32(3600))
	w.Spec.SuccessfulJobsHistoryLimit = i32(2)
	w.Spec.DryRun = true
	env.Create(t, w)
	jobs := make([]*batchv1.Job, 5)
	for i := range jobs {
		jobs[i] = createJob(t, newJob(ns, fmt.Sprintf("job-%d", i)), batchv1.JobComplete, time.Now().Add(-time.Duration(i)*time.Minute))
	}
	g.Eventually(func() (int, error) {
		var l batchv1.JobList
		err := mgr.GetClient().List(ctx, &l, client.InNamespace(ns))
		return len(l.Items), err
	}).Should(Equal(len(jobs)))
	c := noJobLists{mgr.GetClient()}
	// The manager's cache wraps the scoped cache (each kind waited for on
	// its own); without Each it lists, and the passes below would still
	// pass, through it, holding every Job at once.
	_, ok := mgr.GetCache().(scopedcache.Eacher)
	g.Expect(ok).To(BeTrue(), "the manager's cache hands out no object one at a time")

	// The status: every Job matched, the three beyond the history limit
	// reported as what the dry run would delete (the manager's own status
	// controller writes it too).
	st := jobwatchercontroller.NewStatusReconciler(c, mgr.GetCache(), events.NewFakeRecorder(100), false, nil, nil)
	_, err := st.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(status(w)).Should(And(HaveField("MatchedJobs", BeEquivalentTo(5)), HaveField("WouldDelete", HaveLen(3))))

	// A Job beyond the history limit is judged due (the dry run tells it).
	rec := events.NewFakeRecorder(100)
	jr := jobwatchercontroller.NewTestJobReconciler(c, env.Client, mgr.GetCache(), rec)
	_, err = jr.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(jobs[4])})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rec.Events).To(Receive(ContainSubstring("would delete")))

	// A watcher's event queues every finished Job in its reach.
	g.Expect(jobwatchercontroller.JobsReached(ctx, jr, w)).To(HaveLen(len(jobs)))
}
