package incident_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/podbuggertest"
	"github.com/deckhand-dev/deckhand/internal/manager"
	"github.com/deckhand-dev/deckhand/internal/notify/notifytest"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// notifyingOptions are options() with a sinks file: "hook" posting JSON to
// s for every namespace, and "elsewhere" for another namespace only.
func notifyingOptions(t *testing.T, s *notifytest.Receiver) manager.Options {
	path := filepath.Join(t.TempDir(), "sinks.yaml")
	file := fmt.Sprintf("sinks:\n- name: hook\n  url: %s\n- name: elsewhere\n  url: %s\n  namespaces: [another-namespace]\n", s.URL, s.URL)
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	o := podbuggertest.Options(env)
	o.PodBuggerIncidentSinksFile = path
	return o
}

func owed(ns, name string) func() (string, error) {
	return func() (string, error) {
		inc := &debugv1beta1.PodIncident{}
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, inc)
		return inc.Annotations[debugv1beta1.NotificationAnnotation], err
	}
}

// A PodBugger's incidents reach the sinks it names: one notification when a
// record opens, whatever the crashes that follow, and one summary when it
// closes (ten minutes without another), each taken once per key; a sink
// the manager lacks, or that the namespace may not use, is told in an
// Event. What a record still owes is on the record, so a notification the
// receiver did not take before a restart is delivered by the next manager.
func TestIncidentsAreNotifiedOnceWhenTheyOpenAndClose(t *testing.T) {
	g := testenv.NewG(t)
	s := notifytest.NewReceiver(t)
	s.Down.Store(true)
	ns := env.Namespace(t)
	_, stop := env.StartManager(t, notifyingOptions(t, s))
	crashing, quiet := runningPod(t, ns, "web-1", podbuggertest.Web), runningPod(t, ns, "web-2", podbuggertest.Web)
	pb := podbuggertest.Recorder(t, env, ns, []debugv1beta1.Trigger{debugv1beta1.TriggerError}, func(pb *debugv1beta1.PodBugger) {
		pb.Spec.Incidents = &debugv1beta1.IncidentPolicy{Notify: []string{"hook", "elsewhere", "nowhere"}}
	})

	// web-1 is failing now; web-2 failed twice 20 minutes ago, and its
	// record is closed as soon as it opens.
	now := time.Now().Truncate(time.Second)
	podbuggertest.Crash(t, env, quiet, 1, 2, now.Add(-20*time.Minute), false)
	g.Eventually(podbuggertest.IncidentsIn(env, ns)).Should(HaveLen(1))
	podbuggertest.Crash(t, env, quiet, 2, 2, now.Add(-19*time.Minute), false)
	podbuggertest.Crash(t, env, crashing, 1, 1, now.Add(-2*time.Second), false)
	g.Eventually(podbuggertest.IncidentsIn(env, ns)).Should(ConsistOf(
		And(HaveField("Spec.Pod.Name", "web-1"), HaveField("Annotations", HaveKeyWithValue(debugv1beta1.NotificationAnnotation, "opened"))),
		And(HaveField("Spec.Pod.Name", "web-2"), HaveField("Spec.Count", int32(2)))))
	g.Eventually(env.Events(ns, pb)).Should(ContainElement(And(HavePrefix("NotificationSinkUnknown: spec.incidents.notify: "),
		ContainSubstring(`no such sink "elsewhere" for namespace `+ns), ContainSubstring(`no such sink "nowhere"`))))

	// The receiver is down: nothing is taken, and the records still owe
	// their openings when the manager stops.
	g.Consistently(s.Times, "3s").Should(BeEmpty())
	stop()
	recs, err := podbuggertest.IncidentsIn(env, ns)()
	g.Expect(err).NotTo(HaveOccurred())
	var open, closed debugv1beta1.PodIncident
	for _, r := range recs {
		g.Expect(r.Annotations).To(HaveKeyWithValue(debugv1beta1.NotificationAnnotation, "opened"))
		if r.Spec.Pod.Name == "web-1" {
			open = r
		} else {
			closed = r
		}
	}

	// The next manager delivers them once the receiver is back; web-1
	// crashes on, in the same record, and is not told again.
	s.Down.Store(false)
	env.StartManager(t, notifyingOptions(t, s))
	podbuggertest.Crash(t, env, crashing, 2, 1, now, false)
	openKey, closedKeys := string(open.UID)+"/opened", []string{string(closed.UID) + "/opened", string(closed.UID) + "/closed"}
	g.Eventually(s.Times, "20s").Should(Equal(map[string]int{openKey: 1, closedKeys[0]: 1, closedKeys[1]: 1}))
	g.Eventually(owed(ns, open.Name)).Should(Equal("closed"))
	g.Eventually(owed(ns, closed.Name)).Should(BeEmpty())
	g.Consistently(s.Times, "3s").Should(Equal(map[string]int{openKey: 1, closedKeys[0]: 1, closedKeys[1]: 1}))

	summary := s.Last(closedKeys[1])
	g.Expect(summary).To(And(HaveField("Type", "closed"), HaveField("Namespace", ns), HaveField("Source", pb.Name),
		HaveField("Pod", "web-2"), HaveField("Container", "app"), HaveField("Reason", "Error"), HaveField("Record", closed.Name),
		HaveField("Count", int32(2)), HaveField("ExitCode", int32(2))))
	g.Expect(summary.LastTime.Sub(summary.FirstTime)).To(Equal(time.Minute))
}
