//go:build e2e

package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
)

// TestJobWatcher runs real Jobs on the kwok nodes: kwok's pod-complete stage
// completes their pods, so they succeed; a Job whose pod cannot be scheduled
// fails at its activeDeadlineSeconds. A JobWatcher deletes the succeeded one
// with its pods after its TTL, and nothing else.
func TestJobWatcher(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, elsewhere := c.Namespace(t, nil), c.Namespace(t, nil)
	c.RunManager(t)

	// The manager serves the webhook shortly after it starts; until then the
	// API server cannot call it. Only the webhook compiles regexes.
	bad := apply(t, `apiVersion: batch.deckhand.dev/v1
kind: JobWatcher
metadata: {name: bad, namespace: `+ns+`}
spec:
  ttlSecondsAfterSucceeded: 10
  jobNamePatterns: ["([a-z"]
`)
	g.Eventually(bad).WithTimeout(time.Minute).Should(MatchError(And(
		ContainSubstring(`The JobWatcher "bad" is invalid: spec.jobNamePatterns[0]: Invalid value: "([a-z"`),
		ContainSubstring("error parsing regexp: missing closing ]"))))

	g.Expect(apply(t, `apiVersion: batch.deckhand.dev/v1
kind: JobWatcher
metadata: {name: ten-seconds, namespace: `+ns+`}
spec:
  ttlSecondsAfterSucceeded: 10
`)()).To(Succeed())

	succeeds := runJob(t, ns, "succeeds", false)
	fails := runJob(t, ns, "fails", true)
	// A Job's own TTL is Kubernetes' to act on (its TTL-after-finished
	// controller runs in the local cluster).
	ownTTL := runJob(t, ns, "fails-own-ttl", true, func(j *batchv1.Job) { j.Spec.TTLSecondsAfterFinished = ptr.To[int32](3) })
	outside := runJob(t, elsewhere, "succeeds", false)

	finishedAt := waitFinished(t, succeeds, batchv1.JobComplete)
	g.Eventually(pods(succeeds)).WithTimeout(time.Minute).ShouldNot(BeEmpty())
	goneAt := waitGone(t, succeeds, 2*time.Minute)
	t.Logf("Job completed at %s, deleted %s after (TTL 10s)", finishedAt.Format(time.RFC3339), goneAt.Sub(finishedAt).Round(100*time.Millisecond))
	g.Expect(goneAt.Sub(finishedAt)).To(BeNumerically(">=", 10*time.Second), "deleted before its TTL")
	g.Expect(goneAt.Sub(finishedAt)).To(BeNumerically("<", 30*time.Second), "deleted long after its TTL")
	// Background propagation: the garbage collector takes the pods.
	g.Eventually(pods(succeeds)).WithTimeout(time.Minute).Should(BeEmpty())

	waitFinished(t, fails, batchv1.JobFailed)
	waitGone(t, ownTTL, time.Minute)
	waitFinished(t, outside, batchv1.JobComplete)
	// The failed Job (no failed TTL) and the Job of another namespace stay,
	// well past the TTL.
	g.Consistently(func() error {
		return errors.Join(c.Client.Get(ctx, client.ObjectKeyFromObject(fails), &batchv1.Job{}),
			c.Client.Get(ctx, client.ObjectKeyFromObject(outside), &batchv1.Job{}))
	}).WithTimeout(15 * time.Second).Should(Succeed())

	w := &deckhandbatchv1.JobWatcher{}
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ten-seconds"}, w)).To(Succeed())
	g.Eventually(func() (int64, error) {
		err := c.Client.Get(ctx, client.ObjectKeyFromObject(w), w)
		return w.Status.DeletedJobs, err
	}).WithTimeout(30*time.Second).Should(BeEquivalentTo(1), "the watcher deleted only the succeeded Job")
	g.Expect(c.Kubectl("get", "events", "-n", ns, "--field-selector", "reason=Deleted", "-o", "name")).ToNot(BeEmpty())
	g.Expect(c.Kubectl("get", "deckhand", "-n", ns)).To(And(
		ContainSubstring("jobwatcher.batch.deckhand.dev/ten-seconds"), MatchRegexp(`ten-seconds\s+10\s+1\s+0\s+1\s+Active\s`)))
}

// TestClusterJobWatcher checks that namespace patterns reach exactly the
// namespaces they match.
func TestClusterJobWatcher(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reached, missed := c.Namespace(t, nil), c.Namespace(t, nil)
	c.RunManager(t)

	name := "e2e-" + reached
	t.Cleanup(func() { _, _ = c.Kubectl("delete", "clusterjobwatcher", name, "--ignore-not-found") })
	// Anchored: the pattern for "reached" does not match a longer name.
	create := apply(t, `apiVersion: batch.deckhand.dev/v1
kind: ClusterJobWatcher
metadata: {name: `+name+`}
spec:
  ttlSecondsAfterSucceeded: 0
  namespacePatterns: ["`+regexp.QuoteMeta(reached)+`"]
`)
	g.Eventually(create).WithTimeout(time.Minute).Should(Succeed())
	// The samples pass the schema and the webhook.
	for _, sample := range []string{"batch_v1_jobwatcher.yaml", "batch_v1_clusterjobwatcher.yaml"} {
		g.Expect(c.Kubectl("apply", "--dry-run=server", "-f", filepath.Join("..", "..", "config", "samples", sample))).
			To(ContainSubstring("(server dry run)"), sample)
	}

	inReach := runJob(t, reached, "pi", false)
	outOfReach := runJob(t, missed, "pi", false)
	// With a TTL of 0 the Job in reach may be gone before a poll sees it
	// Complete; the watcher's count says it was deleted as a finished Job
	// (a running one is never a candidate).
	waitGone(t, inReach, time.Minute)
	waitFinished(t, outOfReach, batchv1.JobComplete)
	w := &deckhandbatchv1.ClusterJobWatcher{}
	g.Eventually(func() (int64, error) {
		err := c.Client.Get(ctx, client.ObjectKey{Name: name}, w)
		return w.Status.DeletedJobs, err
	}).WithTimeout(30*time.Second).Should(BeEquivalentTo(1), "the cluster watcher deleted the Job in reach")
	g.Eventually(pods(inReach)).WithTimeout(time.Minute).Should(BeEmpty())
	g.Consistently(func() error {
		return c.Client.Get(ctx, client.ObjectKeyFromObject(outOfReach), &batchv1.Job{})
	}).WithTimeout(5 * time.Second).Should(Succeed())
}

// apply returns a function that applies manifest with kubectl.
func apply(t *testing.T, manifest string) func() error {
	path := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	return func() error {
		_, err := c.Kubectl("apply", "-f", path)
		return err
	}
}

// runJob creates a one-pod Job. A failing one cannot be scheduled (no node
// has its label) and fails when its activeDeadlineSeconds run out.
func runJob(t *testing.T, ns, name string, fail bool, mutate ...func(*batchv1.Job)) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "pi", Image: "perl:5.34", Command: []string{"perl", "-Mbignum=bpi", "-wle", "print bpi(2000)"}}},
			}},
		},
	}
	if fail {
		job.Spec.ActiveDeadlineSeconds = ptr.To[int64](2)
		job.Spec.Template.Spec.NodeSelector = map[string]string{"deckhand.dev/no-such-node": "true"}
	}
	for _, m := range mutate {
		m(job)
	}
	if err := c.Client.Create(context.Background(), job); err != nil {
		t.Fatalf("creating Job %s/%s: %v", ns, name, err)
	}
	return job
}

// waitFinished waits for the Job's condition and returns when it turned true.
func waitFinished(t *testing.T, job *batchv1.Job, cond batchv1.JobConditionType) time.Time {
	t.Helper()
	var at time.Time
	NewWithT(t).Eventually(func() (bool, error) {
		if err := c.Client.Get(context.Background(), client.ObjectKeyFromObject(job), job); err != nil {
			return false, err
		}
		for _, cnd := range job.Status.Conditions {
			if cnd.Type == cond && cnd.Status == corev1.ConditionTrue {
				at = cnd.LastTransitionTime.Time
				return true, nil
			}
		}
		return false, nil
	}).WithTimeout(time.Minute).Should(BeTrue(), "Job %s/%s never got %s", job.Namespace, job.Name, cond)
	return at
}

// waitGone polls for the Job until it is gone and returns when it saw that.
func waitGone(t *testing.T, job *batchv1.Job, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		err := c.Client.Get(context.Background(), client.ObjectKeyFromObject(job), &batchv1.Job{})
		if apierrors.IsNotFound(err) {
			return time.Now()
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("Job %s/%s still there after %s", job.Namespace, job.Name, timeout)
	return time.Time{}
}

// pods lists the Job's pods.
func pods(job *batchv1.Job) func() ([]corev1.Pod, error) {
	return func() ([]corev1.Pod, error) {
		var list corev1.PodList
		err := c.Client.List(context.Background(), &list, client.InNamespace(job.Namespace),
			client.MatchingLabels{batchv1.JobNameLabel: job.Name})
		return list.Items, err
	}
}
