package jobwatcher_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/internal/testenv/faultinject"
)

// Before a failed Job goes, the watcher records why it failed in
// status.recentFailures: the Job's reason and message, each failed pod's
// node, exit codes and termination messages. envtest has no nodes to serve
// logs: the record says so instead.
func TestFailedJobLeavesARecord(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	env.StartManager(t, env.ManagerOptions())
	w := jobWatcher(ns, "w", nil, i32(0))
	env.Create(t, w)

	job, finishedAt := failedJobWithPod(t, ns, "etl")

	g.Eventually(env.Exists(job)).Should(BeFalse())
	g.Eventually(status(w)).Should(HaveField("RecentFailures", ConsistOf(And(
		HaveField("Job", "etl"), HaveField("Namespace", ns), HaveField("UID", job.UID),
		HaveField("FailedAt.Time", BeTemporally("==", finishedAt)),
		HaveField("Reason", "BackoffLimitExceeded"), HaveField("Message", "Job has reached the specified backoff limit"),
		HaveField("Pods", ConsistOf(And(
			HaveField("Name", "etl-x7k2p"), HaveField("Node", "node-a"),
			HaveField("Containers", ConsistOf(And(
				HaveField("Name", "main"), HaveField("ExitCode", BeEquivalentTo(3)), HaveField("Reason", "Error"),
				HaveField("Message", "cannot reach db.internal:5432"),
				HaveField("LogTail", BeEmpty()), HaveField("LogError", Not(BeEmpty())))))))),
	))))

	// failureRecords: 0 records nothing.
	g.Expect(env.Update(w, func() { w.Spec.FailureRecords = i32(0) })).To(Succeed())
	g.Eventually(status(w)).Should(HaveField("RecentFailures", BeEmpty()))
}

// failedJobWithPod creates the Job name in ns, failed a minute ago, with a
// failed pod name-x7k2p on node-a whose container main ended with exit
// code 3 and whose sidecar completed.
func failedJobWithPod(t *testing.T, ns, name string) (*batchv1.Job, time.Time) {
	t.Helper()
	g := testenv.NewG(t)
	ctx := context.Background()
	job := newJob(ns, name)
	env.Create(t, job)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-x7k2p", Labels: map[string]string{batchv1.ControllerUidLabel: string(job.UID)}},
		Spec: corev1.PodSpec{NodeName: "node-a", RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "main", Image: "busybox"}, {Name: "sidecar", Image: "busybox"}}},
	}
	env.Create(t, pod)
	pod.Status = corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{
		{Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 3, Reason: "Error", Message: "cannot reach db.internal:5432"}}},
		{Name: "sidecar", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}},
	}}
	g.Expect(env.Client.Status().Update(ctx, pod)).To(Succeed())
	finishedAt := time.Now().Add(-time.Minute).Truncate(time.Second)
	ltt := metav1.NewTime(finishedAt)
	job.Status = batchv1.JobStatus{StartTime: &ltt, Failed: 1, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, LastTransitionTime: ltt, Reason: "BackoffLimitExceeded"},
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastTransitionTime: ltt, Reason: "BackoffLimitExceeded",
			Message: "Job has reached the specified backoff limit"},
	}}
	g.Expect(env.Client.Status().Update(ctx, job)).To(Succeed())
	return job, finishedAt
}

// A ClusterJobWatcher's status is cluster-scoped: whoever may read the
// watcher reads its failure records, whatever namespace the Job was in. Its
// records name the Job, its pods, exit codes and reasons, but carry no log
// tail, and the manager does not even ask for the log. A JobWatcher's
// records, in the Job's own namespace, still read it (envtest has no node to
// serve it: the record says why there is none).
func TestAClusterJobWatchersRecordsCarryNoLogs(t *testing.T) {
	g := testenv.NewG(t)
	tenant, own := env.Namespace(t), env.Namespace(t)
	var mu sync.Mutex
	logReads := map[string]int{} // by namespace
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return faultinject.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			// /api/v1/namespaces/<ns>/pods/<pod>/log
			if p := strings.Split(req.URL.Path, "/"); len(p) == 8 && p[3] == "namespaces" && p[5] == "pods" && p[7] == "log" {
				mu.Lock()
				logReads[p[4]]++
				mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	reads := func(ns string) func() int {
		return func() int { mu.Lock(); defer mu.Unlock(); return logReads[ns] }
	}
	env.StartManagerWithConfig(t, cfg, env.ManagerOptions())
	cluster := clusterJobWatcher(t, nil, i32(0), tenant)
	env.Create(t, cluster)
	namespaced := jobWatcher(own, "w", nil, i32(0))
	env.Create(t, namespaced)

	clusterJob, _ := failedJobWithPod(t, tenant, "etl")
	ownJob, _ := failedJobWithPod(t, own, "etl")

	g.Eventually(env.Exists(clusterJob)).Should(BeFalse())
	g.Eventually(status(cluster)).Should(HaveField("RecentFailures", ConsistOf(And(
		HaveField("Job", "etl"), HaveField("Namespace", tenant), HaveField("Reason", "BackoffLimitExceeded"),
		HaveField("Pods", ConsistOf(And(
			HaveField("Name", "etl-x7k2p"),
			HaveField("Containers", ConsistOf(And(
				HaveField("Name", "main"), HaveField("ExitCode", BeEquivalentTo(3)), HaveField("Reason", "Error")))))))))))
	main := cluster.Status.RecentFailures[0].Pods[0].Containers[0]
	g.Expect(main.LogTail).To(BeEmpty(), "a ClusterJobWatcher's record carries a log tail")
	g.Expect(main.LogError).To(BeEmpty(), "a ClusterJobWatcher's record tried to read the log")
	g.Expect(reads(tenant)()).To(BeZero(), "log reads in the tenant's namespace for a ClusterJobWatcher's record")

	g.Eventually(env.Exists(ownJob)).Should(BeFalse())
	g.Eventually(status(namespaced)).Should(HaveField("RecentFailures", ConsistOf(
		HaveField("Pods", ConsistOf(HaveField("Containers", ConsistOf(And(
			HaveField("Name", "main"), HaveField("LogError", Not(BeEmpty()))))))))))
	g.Expect(reads(own)()).To(BeNumerically(">", 0), "a JobWatcher's record did not read the log")
}

// A failed Job's record is in its watcher's status before the Job is
// deleted: a manager that stops right after the delete (before its next
// status write) loses no record. Found by test/faults (crash after every
// write): the record used to live only in the stopped manager's memory.
func TestFailureRecordSurvivesACrashRightAfterTheDelete(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	crash := faultinject.NewCrashPoint(1)
	crash.Only = func(req *http.Request) bool {
		return req.Method == http.MethodDelete && strings.Contains(req.URL.Path, "/jobs/")
	}
	_, stop := env.StartManagerWithConfig(t, crash.Config(env.Config), env.ManagerOptions())
	w := jobWatcher(ns, "w", nil, i32(0))
	env.Create(t, w)
	job := createJob(t, newJob(ns, "etl"), batchv1.JobFailed, time.Now().Add(-time.Minute))

	g.Eventually(crash.Crashed()).Should(BeClosed(), "the manager never deleted the Job")
	stop()
	g.Expect(env.Exists(job)()).To(BeFalse())

	env.StartManager(t, env.ManagerOptions())
	g.Eventually(status(w)).Should(HaveField("RecentFailures", ContainElement(HaveField("UID", job.UID))))
}
