package jobwatcher_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

func TestWebhookRefusesInvalidWatchers(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	env.StartManager(t, env.ManagerOptions())

	bad := jobWatcher(ns, "bad", i32(10), nil)
	bad.Spec.JobNamePatterns = []string{"pi-.*", "([a-z"}
	bad.Spec.ExcludeJobNamePatterns = []string{"a(b"}
	g.Expect(env.Client.Create(ctx, bad)).To(And(
		MatchError(ContainSubstring(`spec.jobNamePatterns[1]: Invalid value: "([a-z": error parsing regexp: missing closing ]: `+"`[a-z`")),
		MatchError(ContainSubstring(`spec.excludeJobNamePatterns[0]: Invalid value: "a(b": error parsing regexp: missing closing ): `)),
	))

	cluster := clusterJobWatcher(t, nil, i32(10), "team-.*", "*oops")
	g.Expect(env.Client.Create(ctx, cluster)).To(MatchError(ContainSubstring(
		`spec.namespacePatterns[1]: Invalid value: "*oops": error parsing regexp: missing argument to repetition operator`)))

	// What the schema refuses never reaches the webhook.
	g.Expect(env.Client.Create(ctx, jobWatcher(ns, "no-ttl", nil, nil))).To(MatchError(ContainSubstring(
		"at least one of ttlSecondsAfterSucceeded, ttlSecondsAfterFailed, successfulJobsHistoryLimit and failedJobsHistoryLimit must be set")))
	g.Expect(env.Client.Create(ctx, jobWatcher(ns, "negative", i32(-1), nil))).To(MatchError(ContainSubstring(
		"spec.ttlSecondsAfterSucceeded: Invalid value: -1: spec.ttlSecondsAfterSucceeded in body should be greater than or equal to 0")))

	// An update that breaks a valid watcher is refused too.
	good := jobWatcher(ns, "good", i32(10), nil)
	g.Expect(env.Client.Create(ctx, good)).To(Succeed())
	g.Expect(env.Update(good, func() { good.Spec.JobNamePatterns = []string{"([a-z"} })).
		To(MatchError(ContainSubstring("spec.jobNamePatterns[0]")))
}

func TestDeletesFinishedJobsAfterTheirTTL(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	env.StartManager(t, env.ManagerOptions())
	w := jobWatcher(ns, "w", i32(3), nil)
	w.Spec.ExcludeJobNamePatterns = []string{"keep-.*"}
	env.Create(t, w)

	// Conditions keep whole seconds.
	now := time.Now().Truncate(time.Second)
	done := createJob(t, newJob(ns, "done"), batchv1.JobComplete, now)
	failed := createJob(t, newJob(ns, "failed"), batchv1.JobFailed, now.Add(-time.Hour))
	running := createJob(t, newJob(ns, "running"), "", now)
	excluded := createJob(t, newJob(ns, "keep-me"), batchv1.JobComplete, now.Add(-time.Hour))
	own := newJob(ns, "own-ttl")
	own.Spec.TTLSecondsAfterFinished = i32(0)
	createJob(t, own, batchv1.JobComplete, now.Add(-time.Hour))

	// Not before its TTL (it expires at now + 3s; creating the Jobs took
	// some of that)...
	g.Consistently(env.Exists(done)).WithTimeout(time.Until(now.Add(3*time.Second)) - 100*time.Millisecond).Should(BeTrue())
	// ...but soon after.
	g.Eventually(env.Exists(done)).Should(BeFalse())
	g.Expect(time.Since(now)).To(BeNumerically(">=", 3*time.Second))

	g.Eventually(status(w)).Should(And(
		HaveField("DeletedJobs", BeEquivalentTo(1)),
		HaveField("MatchedJobs", BeEquivalentTo(3)), // failed, running, own-ttl
		HaveField("PendingDeletions", BeEquivalentTo(0)),
		HaveField("NextDeletionTime", BeNil()),
		HaveField("ObservedGeneration", w.Generation),
		HaveField("Conditions", ContainElement(And(
			HaveField("Type", deckhandbatchv1.ConditionReady), HaveField("Reason", deckhandbatchv1.ReasonActive)))),
	))
	g.Eventually(env.Events(ns, w)).Should(ContainElement(
		"Deleted: deleted Succeeded Job " + ns + "/done (TTL 3s)"))

	g.Expect(testenv.Metric("deckhand_jobwatcher_jobs_deleted_total", map[string]string{
		"watcher_kind": "JobWatcher", "watcher_namespace": ns, "watcher": "w", "outcome": "Succeeded", "result": "deleted"})).
		To(BeEquivalentTo(1))
	g.Expect(testenv.MetricSeries("deckhand_jobwatcher_deletion_lag_seconds", nil)).To(Equal(1))
	g.Expect(testenv.HistogramCount("deckhand_jobwatcher_deletion_lag_seconds", nil)).To(BeNumerically(">=", 1))

	// The failed Job (no failed TTL), the running one, the excluded one and
	// the one with its own TTL (Kubernetes' to delete) stay.
	for _, job := range []*batchv1.Job{failed, running, excluded, own} {
		g.Expect(env.Exists(job)()).To(BeTrue(), job.Name)
	}
}

func TestJobsFromBeforeTheManagerStartedAreDeleted(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	_, stop := env.StartManager(t, env.ManagerOptions())
	w := jobWatcher(ns, "w", i32(60), i32(60))
	env.Create(t, w)
	stop()

	// Finished long ago, while no manager ran; and one that is not due yet.
	old := createJob(t, newJob(ns, "old"), batchv1.JobFailed, time.Now().Add(-time.Hour))
	recent := createJob(t, newJob(ns, "recent"), batchv1.JobComplete, time.Now())

	env.StartManager(t, env.ManagerOptions())
	g.Eventually(env.Exists(old)).Should(BeFalse())
	g.Eventually(status(w)).Should(And(
		HaveField("PendingDeletions", BeEquivalentTo(1)),
		HaveField("NextDeletionTime", Not(BeNil())),
		HaveField("DeletedJobs", BeEquivalentTo(1))))
	g.Expect(env.Exists(recent)()).To(BeTrue())
}

func TestWatcherActsOnlyInItsNamespace(t *testing.T) {
	g := testenv.NewG(t)
	mine, theirs := env.Namespace(t), env.Namespace(t)
	env.StartManager(t, env.ManagerOptions())
	env.Create(t, jobWatcher(mine, "w", i32(0), i32(0)))

	other := createJob(t, newJob(theirs, "pi"), batchv1.JobComplete, time.Now().Add(-time.Hour))
	own := createJob(t, newJob(mine, "pi"), batchv1.JobComplete, time.Now().Add(-time.Hour))
	g.Eventually(env.Exists(own)).Should(BeFalse())
	g.Consistently(env.Exists(other)).Should(BeTrue())
}

func TestAnnotationsOverrideWatchers(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	env.StartManager(t, env.ManagerOptions())
	env.Create(t, jobWatcher(ns, "w", i32(3600), nil))
	finishedAt := time.Now().Add(-time.Minute)

	short := newJob(ns, "short")
	short.Annotations = map[string]string{deckhandbatchv1.TTLAnnotation: "30s"}
	createJob(t, short, batchv1.JobComplete, finishedAt)
	kept := newJob(ns, "kept")
	kept.Annotations = map[string]string{deckhandbatchv1.TTLAnnotation: "1s", deckhandbatchv1.KeepAnnotation: "true"}
	createJob(t, kept, batchv1.JobComplete, finishedAt)
	bad := newJob(ns, "bad")
	bad.Annotations = map[string]string{deckhandbatchv1.TTLAnnotation: "soon"}
	createJob(t, bad, batchv1.JobComplete, finishedAt)

	g.Eventually(env.Exists(short)).Should(BeFalse())
	g.Eventually(env.Events(ns, bad)).Should(ContainElement(ContainSubstring(
		`InvalidTTLAnnotation: annotation batch.deckhand.dev/ttl="soon" is not a non-negative duration`)))
	g.Expect(env.Exists(kept)()).To(BeTrue())
	g.Expect(env.Exists(bad)()).To(BeTrue())

	// Taking the keep annotation off lets the ttl annotation act.
	g.Expect(env.Update(kept, func() { delete(kept.Annotations, deckhandbatchv1.KeepAnnotation) })).To(Succeed())
	g.Eventually(env.Exists(kept)).Should(BeFalse())
}

func TestNamespacedWatchersOverClusterWatchers(t *testing.T) {
	g := testenv.NewG(t)
	guarded, open, outside := env.Namespace(t), env.Namespace(t), env.Namespace(t)
	env.StartManager(t, env.ManagerOptions())
	// The cluster policy reaches two of the three namespaces.
	cluster := clusterJobWatcher(t, i32(0), i32(0), guarded, open)
	env.Create(t, cluster)
	slow := jobWatcher(guarded, "slow", i32(3600), nil)
	env.Create(t, slow)

	finishedAt := time.Now().Add(-time.Minute)
	inGuarded := createJob(t, newJob(guarded, "succeeded"), batchv1.JobComplete, finishedAt)
	failedInGuarded := createJob(t, newJob(guarded, "failed"), batchv1.JobFailed, finishedAt)
	inOpen := createJob(t, newJob(open, "succeeded"), batchv1.JobComplete, finishedAt)
	inOutside := createJob(t, newJob(outside, "succeeded"), batchv1.JobComplete, finishedAt)

	g.Eventually(env.Exists(inOpen)).Should(BeFalse())
	// The namespace's watcher has no failed TTL: the cluster policy's applies.
	g.Eventually(env.Exists(failedInGuarded)).Should(BeFalse())
	// Its succeeded TTL, an hour, wins over the cluster policy's 0s.
	g.Consistently(env.Exists(inGuarded)).Should(BeTrue())
	g.Expect(env.Exists(inOutside)()).To(BeTrue())

	// The cluster watcher matches the one Job left, but does not govern it.
	g.Eventually(status(cluster)).Should(And(
		HaveField("MatchedJobs", BeEquivalentTo(1)),
		HaveField("PendingDeletions", BeEquivalentTo(0)),
		HaveField("DeletedJobs", BeEquivalentTo(2))))
	g.Eventually(status(slow)).Should(And(
		HaveField("MatchedJobs", BeEquivalentTo(1)),
		HaveField("PendingDeletions", BeEquivalentTo(1)),
		HaveField("NextDeletionTime.Time", BeTemporally("~", finishedAt.Add(time.Hour), time.Second))))
}

func TestDryRunDeletesNothingAndReports(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	env.StartManager(t, env.ManagerOptions())
	w := jobWatcher(ns, "w", i32(0), i32(0))
	w.Spec.DryRun = true
	env.Create(t, w)
	job := createJob(t, newJob(ns, "pi"), batchv1.JobFailed, time.Now().Add(-time.Minute))

	g.Eventually(status(w)).Should(And(
		HaveField("WouldDelete", ConsistOf(ns+"/pi")),
		HaveField("Conditions", ContainElement(HaveField("Reason", deckhandbatchv1.ReasonDryRun)))))
	g.Eventually(env.Events(ns, job)).Should(ContainElement(ContainSubstring("WouldDelete: JobWatcher/" + ns + "/w would delete this Failed Job")))
	g.Expect(env.Exists(job)()).To(BeTrue())

	// Leaving dry run deletes it.
	g.Expect(env.Update(w, func() { w.Spec.DryRun = false })).To(Succeed())
	g.Eventually(env.Exists(job)).Should(BeFalse())
	g.Eventually(status(w)).Should(And(HaveField("WouldDelete", BeEmpty()), HaveField("DeletedJobs", BeEquivalentTo(1))))
}

func TestSuspendedWatcherHoldsItsJobs(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	env.StartManager(t, env.ManagerOptions())
	w := jobWatcher(ns, "w", i32(0), nil)
	w.Spec.Suspend = true
	env.Create(t, w)
	// A shorter policy does not take over while the longer one is suspended.
	env.Create(t, clusterJobWatcher(t, i32(0), nil, ns))
	w2 := jobWatcher(ns, "w2", i32(0), nil)
	w2.Spec.JobNamePatterns = []string{"other"}
	env.Create(t, w2)
	job := createJob(t, newJob(ns, "pi"), batchv1.JobComplete, time.Now().Add(-time.Minute))

	g.Eventually(status(w)).Should(And(
		HaveField("PendingDeletions", BeEquivalentTo(1)),
		HaveField("Conditions", ContainElement(HaveField("Reason", deckhandbatchv1.ReasonSuspended)))))
	g.Consistently(env.Exists(job)).Should(BeTrue())

	g.Expect(env.Update(w, func() { w.Spec.Suspend = false })).To(Succeed())
	g.Eventually(env.Exists(job)).Should(BeFalse())
}

func TestForegroundPropagationIsPassedOn(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	env.StartManager(t, env.ManagerOptions())
	w := jobWatcher(ns, "w", i32(0), nil)
	w.Spec.PropagationPolicy = ptr.To(metav1.DeletePropagationForeground)
	env.Create(t, w)
	job := createJob(t, newJob(ns, "pi"), batchv1.JobComplete, time.Now().Add(-time.Minute))

	// envtest has no garbage collector: a foreground deletion leaves the Job
	// with the foregroundDeletion finalizer, which shows the policy was used.
	g.Eventually(func() ([]string, error) {
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(job), job)
		return job.Finalizers, err
	}).Should(ContainElement(metav1.FinalizerDeleteDependents))
}

// A Job whose finish condition carries no time, as a controller named in
// its spec.managedBy may write it, is kept: like Kubernetes' TTL controller,
// Deckhand cannot tell when it expires, and never deletes it at once.
func TestJobFinishedAtNoTimeIsKept(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	env.StartManager(t, env.ManagerOptions())
	env.Create(t, jobWatcher(ns, "w", i32(0), i32(0)))

	untimed := newJob(ns, "untimed")
	untimed.Spec.ManagedBy = ptr.To("example.com/batch-scheduler")
	env.Create(t, untimed)
	start := metav1.NewTime(time.Now().Add(-time.Hour))
	untimed.Status.StartTime, untimed.Status.CompletionTime, untimed.Status.Succeeded = &start, &start, 1
	untimed.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: "Done"},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: "Done"},
	}
	g.Expect(env.Client.Status().Update(context.Background(), untimed)).To(Succeed())
	g.Expect(untimed.Status.Conditions[1].LastTransitionTime.IsZero()).To(BeTrue(), "the apiserver stamped the condition")

	// The watcher deletes a timed Job at once, so it saw the untimed one too.
	timed := createJob(t, newJob(ns, "timed"), batchv1.JobComplete, time.Now().Add(-time.Hour))
	g.Eventually(env.Exists(timed)).Should(BeFalse())
	g.Consistently(env.Exists(untimed)).Should(BeTrue())
}

// History limits: a watcher keeps the newest N succeeded Jobs of each name
// prefix (a CronJob's Jobs); older ones go at once, before their TTL, and a
// newer Job pushes the oldest out. A Job whose own annotation allows it to
// stay longer stays.
func TestHistoryLimitsKeepTheNewest(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	env.StartManager(t, env.ManagerOptions())
	w := jobWatcher(ns, "w", i32(3600), nil)
	w.Spec.SuccessfulJobsHistoryLimit = i32(2)
	w.Spec.HistoryGroupBy = deckhandbatchv1.HistoryByNamePrefix
	env.Create(t, w)

	at := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
	job := func(name string, minutes int, mutate ...func(*batchv1.Job)) *batchv1.Job {
		j := newJob(ns, name)
		for _, m := range mutate {
			m(j)
		}
		return createJob(t, j, batchv1.JobComplete, at.Add(time.Duration(minutes)*time.Minute))
	}
	annotated := job("nightly-0", 0, func(j *batchv1.Job) {
		j.Annotations = map[string]string{deckhandbatchv1.TTLAnnotation: "24h"}
	})
	oldest, older := job("nightly-1", 1), job("nightly-2", 2)
	newer, newest := job("nightly-3", 3), job("nightly-4", 4)
	other := job("hourly-1", 0)

	g.Eventually(env.Exists(oldest)).Should(BeFalse())
	g.Eventually(env.Exists(older)).Should(BeFalse())
	// Beyond the limit too, but its annotation lets it stay a day.
	g.Consistently(func() []bool {
		return []bool{exists(annotated), exists(newer), exists(newest), exists(other)}
	}).Should(Equal([]bool{true, true, true, true}))

	// A newer Job pushes the oldest of the two out.
	job("nightly-5", 5)
	g.Eventually(env.Exists(newer)).Should(BeFalse())
	g.Expect(exists(newest)).To(BeTrue())
	g.Expect(exists(annotated)).To(BeTrue())
	g.Eventually(env.Events(ns, w)).Should(ContainElement(ContainSubstring("beyond the history limit")))
}

func exists(obj client.Object) bool {
	ok, err := env.Exists(obj)()
	return ok && err == nil
}

// Deletions are told in Events on the watcher, one per status write for all
// deletions since the last, not one per Job (nor one on the Job, which goes
// with it): an Event per deletion doubled the API calls a deletion costs.
func TestDeletionsAreToldInFewEvents(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	const n = 8
	_, stop := env.StartManager(t, env.ManagerOptions()) // its webhook admits the watcher
	w := jobWatcher(ns, "w", i32(1), nil)
	env.Create(t, w)
	stop()
	// All due when the manager starts.
	jobs := make([]*batchv1.Job, n)
	for i := range jobs {
		jobs[i] = createJob(t, newJob(ns, fmt.Sprintf("done-%d", i)), batchv1.JobComplete, time.Now().Add(-time.Hour))
	}
	env.StartManager(t, env.ManagerOptions())
	g.Eventually(status(w)).Should(HaveField("DeletedJobs", BeEquivalentTo(n)))

	// How many deletions each Event tells.
	told := func() (counts []int, err error) {
		evs, err := env.Events(ns, w)()
		for _, e := range evs {
			if m := regexp.MustCompile(`^Deleted: deleted (\d+) finished Jobs: `).FindStringSubmatch(e); m != nil {
				c, _ := strconv.Atoi(m[1])
				counts = append(counts, c)
			} else if strings.HasPrefix(e, "Deleted: deleted Succeeded Job "+ns+"/done-") {
				counts = append(counts, 1)
			}
		}
		return counts, err
	}
	g.Eventually(told).Should(WithTransform(func(c []int) int {
		sum := 0
		for _, v := range c {
			sum += v
		}
		return sum
	}, Equal(n)), "every deletion is told")
	g.Expect(told()).To(WithTransform(func(c []int) int { return len(c) }, BeNumerically("<", n)), "fewer Events than deletions")
	for _, job := range jobs {
		g.Expect(env.Events(ns, job)()).To(BeEmpty(), "an Event on a deleted Job")
	}
}
