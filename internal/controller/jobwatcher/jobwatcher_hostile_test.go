package jobwatcher_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	jobwatchercontroller "github.com/deckhand-dev/deckhand/internal/controller/jobwatcher"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// bomb is 1,023 bytes that RE2 compiles to a million instructions (267 MB,
// half a second, each time).
var bomb = "(?:" + strings.Repeat("a", 1013) + "){1000}"

// TestWebhookRefusesARegexBomb: a namespace editor's regex bomb is refused
// at admission, naming the field.
func TestWebhookRefusesARegexBomb(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	env.StartManager(t, env.ManagerOptions())
	w := jobWatcher(ns, "bomb", i32(10), nil)
	w.Spec.JobNamePatterns = []string{"pi-.*", bomb}
	g.Expect(env.Client.Create(context.Background(), w)).To(And(
		MatchError(ContainSubstring(`spec.jobNamePatterns[1]: Invalid value: "(?:aaaa`)),
		MatchError(ContainSubstring("compiles to more than 2048 instructions (about 1013004): a repeat count multiplies the size of what it repeats")),
	))
}

// TestWithoutWebhooksTheControllerRefusesARegexBomb: with webhooks off, a
// watcher whose exclusion is a regex bomb is stored; the controller does
// not compile the bomb, says which field it refuses in the watcher's Ready
// condition, and deletes nothing for that watcher (an exclusion it cannot
// read must not widen what it deletes).
func TestWithoutWebhooksTheControllerRefusesARegexBomb(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	env.WithoutValidation(t, "vjobwatcher-v1.batch.deckhand.dev")
	opts := env.ManagerOptions()
	opts.DisableWebhooks = true
	env.StartManager(t, opts)

	job := createJob(t, newJob(ns, "pi"), batchv1.JobComplete, time.Now().Add(-time.Hour))
	w := jobWatcher(ns, "bomb", i32(0), nil)
	w.Spec.ExcludeJobNamePatterns = []string{"keep-.*", bomb}
	g.Eventually(func() error { return env.Client.Create(ctx, w.DeepCopy()) }).Should(Succeed())

	g.Eventually(status(w)).Should(HaveField("Conditions", And(
		testenv.HaveCondition(deckhandbatchv1.ConditionReady, metav1.ConditionFalse, deckhandbatchv1.ReasonInvalidSpec),
		ContainElement(HaveField("Message", ContainSubstring("spec.excludeJobNamePatterns[1]: compiles to more than 2048 instructions"))),
	)))
	g.Consistently(env.Exists(job)).Should(BeTrue())
}

// TestClusterWatchersLeaveProtectedNamespacesAlone: a ClusterJobWatcher
// that reaches every namespace does not delete the Jobs of kube-system nor
// of the manager's own namespace; a wildcard that covers kube-system does
// not either; a pattern that names kube-system exactly does.
func TestClusterWatchersLeaveProtectedNamespacesAlone(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	tenant, own := env.Namespace(t), env.Namespace(t)
	opts := env.ManagerOptions()
	opts.Namespace = own
	env.StartManager(t, opts)

	long := time.Now().Add(-time.Hour)
	system := newJob(metav1.NamespaceSystem, "")
	system.GenerateName = "deckhand-test-"
	createJob(t, system, batchv1.JobComplete, long)
	t.Cleanup(func() { _ = env.Client.Delete(ctx, system) })
	mine := createJob(t, newJob(own, "mine"), batchv1.JobComplete, long)
	theirs := createJob(t, newJob(tenant, "theirs"), batchv1.JobComplete, long)

	env.Create(t, clusterJobWatcher(t, i32(0), nil))             // every namespace
	env.Create(t, clusterJobWatcher(t, i32(0), nil, "kube-s.*")) // covers kube-system
	g.Eventually(env.Exists(theirs)).Should(BeFalse())
	g.Consistently(env.Exists(system)).Should(BeTrue())
	g.Expect(env.Exists(mine)()).To(BeTrue())

	env.Create(t, clusterJobWatcher(t, i32(0), nil, "team-.*", metav1.NamespaceSystem))
	g.Eventually(env.Exists(system)).Should(BeFalse())
	g.Expect(env.Exists(mine)()).To(BeTrue())
}

// TestClusterWatchersLeaveListedAndLabelledNamespacesAlone: a
// ClusterJobWatcher that reaches every namespace does not delete the Jobs
// of a namespace the operator lists (--jobwatcher-protected-namespaces) nor
// of one labelled deckhand.dev/protected=true; it deletes a tenant's; a
// pattern naming the labelled namespace exactly reaches it.
func TestClusterWatchersLeaveListedAndLabelledNamespacesAlone(t *testing.T) {
	g := testenv.NewG(t)
	tenant, listed := env.Namespace(t), env.Namespace(t)
	labelled := env.NamespaceWithLabels(t, map[string]string{deckhandbatchv1.ProtectedNamespaceLabel: "true"})
	opts := env.ManagerOptions()
	opts.JobWatcherProtectedNamespaces = append(slices.Clone(jobwatchercontroller.DefaultProtectedNamespaces), listed)
	env.StartManager(t, opts)

	long := time.Now().Add(-time.Hour)
	inListed := createJob(t, newJob(listed, "platform"), batchv1.JobComplete, long)
	inLabelled := createJob(t, newJob(labelled, "platform"), batchv1.JobComplete, long)
	theirs := createJob(t, newJob(tenant, "theirs"), batchv1.JobComplete, long)

	env.Create(t, clusterJobWatcher(t, i32(0), nil)) // every namespace
	g.Eventually(env.Exists(theirs)).Should(BeFalse())
	g.Consistently(env.Exists(inListed)).Should(BeTrue())
	g.Expect(env.Exists(inLabelled)()).To(BeTrue())

	env.Create(t, clusterJobWatcher(t, i32(0), nil, labelled))
	g.Eventually(env.Exists(inLabelled)).Should(BeFalse())
	g.Expect(env.Exists(inListed)()).To(BeTrue())
}
