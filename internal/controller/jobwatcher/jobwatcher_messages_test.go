package jobwatcher_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// TestWithoutWebhooksAHugeInvalidSpecIsStillReported: with webhooks off, a
// watcher whose every pattern is a long broken regex makes an error far
// over the 32 KiB a condition message may hold; the watcher still says it
// is invalid (the message cut), instead of its status write failing.
func TestWithoutWebhooksAHugeInvalidSpecIsStillReported(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	env.WithoutValidation(t, "vjobwatcher-v1.batch.deckhand.dev")
	opts := env.ManagerOptions()
	opts.DisableWebhooks = true
	env.StartManager(t, opts)

	w := jobWatcher(ns, "broken", i32(0), nil)
	for range 64 {
		// Each error quotes the pattern: about 1 KiB each.
		w.Spec.JobNamePatterns = append(w.Spec.JobNamePatterns, "("+strings.Repeat("a", 1000))
	}
	g.Eventually(func() error { return env.Client.Create(ctx, w.DeepCopy()) }).Should(Succeed())
	g.Eventually(status(w)).Should(HaveField("Conditions", And(
		testenv.HaveCondition(deckhandbatchv1.ConditionReady, metav1.ConditionFalse, deckhandbatchv1.ReasonInvalidSpec),
		ContainElement(HaveField("Message", And(
			HavePrefix("spec.jobNamePatterns[0]: error parsing regexp: missing closing )"),
			HaveSuffix("bytes cut]")))),
	)))
}

// TestALongTTLAnnotationIsStillReported: a Job's ttl annotation can be
// 256 KiB; the Event that says it does not parse is cut to what the
// apiserver takes, instead of being refused and lost.
func TestALongTTLAnnotationIsStillReported(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	env.StartManager(t, env.ManagerOptions())
	env.Create(t, jobWatcher(ns, "w", i32(0), nil))
	job := newJob(ns, "pi")
	job.Annotations = map[string]string{deckhandbatchv1.TTLAnnotation: strings.Repeat("9", 5000) + "parsecs"}
	createJob(t, job, batchv1.JobComplete, time.Now().Add(-time.Hour))
	g.Eventually(env.Events(ns, job)).Should(ContainElement(And(
		HavePrefix("InvalidTTLAnnotation: annotation batch.deckhand.dev/ttl=\"9999"),
		HaveSuffix("bytes cut]"))))
	g.Expect(env.Exists(job)()).To(BeTrue())
}
