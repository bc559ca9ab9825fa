package jobwatcher_test

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	jobwatchercontroller "github.com/deckhand-dev/deckhand/internal/controller/jobwatcher"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// Events alike but for their note merge into one series that keeps the
// first note: a second round of deletions told while the watcher was
// unchanged showed as the first round's Event with count 2. Each round
// names its first Job as the related object, so every round is an Event of
// its own in kubectl events.
func TestEveryRoundOfDeletionsIsAnEventOfItsOwn(t *testing.T) {
	g := testenv.NewG(t)
	r := jobwatchercontroller.NewStatusReconciler(env.Client, nil, env.EventRecorder(t, jobwatchercontroller.ControllerName), false, nil, nil)

	// The manager serves the webhook (so the watcher can be created) but
	// watches another namespace.
	opts := env.ManagerOptions()
	opts.WatchNamespaces = []string{"kube-system"}
	env.StartManager(t, opts)
	ns := env.Namespace(t)
	w := &deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rounds"},
		Spec: deckhandbatchv1.JobWatcherSpec{JobPolicy: deckhandbatchv1.JobPolicy{TTLSecondsAfterSucceeded: ptr.To(int32(1))}}}
	env.Create(t, w)
	jobwatchercontroller.TellDeleted(r, w, ns+"/a", ns+"/b")
	jobwatchercontroller.TellDeleted(r, w, ns+"/c", ns+"/d")
	jobwatchercontroller.TellDeleted(r, w, ns+"/e")
	jobwatchercontroller.TellDeleted(r, w, ns+"/f")
	g.Eventually(env.Events(ns, w)).Should(ConsistOf(
		jobwatchercontroller.EventDeleted+": deleted 2 finished Jobs: "+ns+"/a, "+ns+"/b",
		jobwatchercontroller.EventDeleted+": deleted 2 finished Jobs: "+ns+"/c, "+ns+"/d",
		jobwatchercontroller.EventDeleted+": deleted Succeeded Job "+ns+"/e (TTL 1s)",
		jobwatchercontroller.EventDeleted+": deleted Succeeded Job "+ns+"/f (TTL 1s)"))
}
