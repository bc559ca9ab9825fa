package podbugger_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	podbuggercontroller "github.com/deckhand-dev/deckhand/internal/controller/podbugger"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/podbuggertest"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// passes is how many passes the PodBugger controller has made (over every
// PodBugger of the test binary).
func passes() (float64, error) {
	return testenv.Metric("controller_runtime_reconcile_total", map[string]string{"controller": podbuggercontroller.ControllerName})
}

// settledPasses waits until the PodBugger controller has made no pass for a
// second, and returns how many it made.
func settledPasses(t *testing.T) float64 {
	t.Helper()
	var n float64
	testenv.NewG(t).Eventually(func() (bool, error) {
		before, err := passes()
		if err != nil {
			return false, err
		}
		time.Sleep(time.Second)
		n, err = passes()
		return n == before, err
	}).Should(BeTrue())
	return n
}

// TestABurstOfRecordsIsPrunedInAFewPasses: pods failing together create
// records by the dozen a second, and each pass of their PodBugger lists the
// namespace's pods and its records: the PodBugger still keeps exactly
// maxRecords records, those of the latest failures, and gets there in a few
// passes, not one for every record created and deleted (1,000 crash-looping
// pods spent most of the manager's CPU on those). A record deleted by hand
// wakes no pass at all.
func TestABurstOfRecordsIsPrunedInAFewPasses(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	env.StartManager(t, podbuggertest.Options(env))
	const n = 30
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		pods[i] = pod(t, ns, fmt.Sprintf("web-%d", i), podbuggertest.Web, true)
	}
	pb := podbuggertest.Recorder(t, env, ns, []debugv1beta1.Trigger{debugv1beta1.TriggerError}, func(pb *debugv1beta1.PodBugger) {
		pb.Spec.Incidents = &debugv1beta1.IncidentPolicy{MaxRecords: 3}
	})
	g.Eventually(podbuggertest.Status(env, pb)).Should(podbuggertest.Condition(debugv1beta1.ConditionReady, metav1.ConditionTrue, debugv1beta1.ReasonCaptureOnly))
	before := settledPasses(t)

	// Each pod fails a second after the one before it: the last three are
	// the latest failures.
	t0 := time.Now().Add(-time.Minute).Truncate(time.Second)
	for i, p := range pods {
		podbuggertest.Crash(t, env, p, 1, 1, t0.Add(time.Duration(i)*time.Second), false)
	}
	names := func() ([]string, error) {
		items, err := podbuggertest.IncidentsIn(env, ns)()
		out := make([]string, 0, len(items))
		for _, i := range items {
			out = append(out, i.Spec.Pod.Name)
		}
		return out, err
	}
	g.Eventually(names).Should(ConsistOf("web-27", "web-28", "web-29"))
	g.Expect(testenv.Metric("deckhand_podbugger_incidents_total", map[string]string{"namespace": ns})).To(BeEquivalentTo(n))
	after := settledPasses(t)
	g.Expect(names()).To(ConsistOf("web-27", "web-28", "web-29"))
	t.Logf("%d records created, %d pruned, in %g passes", n, n-3, after-before)
	g.Expect(after-before).To(BeNumerically("<=", 5), "passes of the PodBugger for %d records", n)

	kept, err := podbuggertest.IncidentsIn(env, ns)()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Delete(ctx, &kept[0])).To(Succeed())
	g.Eventually(podbuggertest.IncidentsIn(env, ns)).Should(HaveLen(2))
	g.Consistently(passes, 2*time.Second).Should(Equal(after), "a record deleted by hand woke its PodBugger")
	// The next test's manager must not find these pods' failures, whose
	// records were pruned, under a PodBugger of a namespace going away.
	g.Expect(env.Client.Delete(ctx, pb)).To(Succeed())
	g.Eventually(env.Exists(pb)).Should(BeFalse())
}

// TestARecordIsNotWrittenToOnceItWasPruned: the recorder remembers a
// record it wrote only until its cache shows it or it is deleted (and,
// until the pod goes, the time of each family's last failure counted). A crash-looping pod
// whose record was pruned meanwhile (other pods' failures turned the
// records over) does not have the pruned failure recorded again, and has
// its next failure open a new record straight away: no write is sent to the
// record that is gone (with the record remembered, every such failure cost
// a PATCH answered 404 before its record was created).
func TestARecordIsNotWrittenToOnceItWasPruned(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	var armed atomic.Bool
	var gonePatches atomic.Int32
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTrip(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if armed.Load() && err == nil && req.Method == http.MethodPatch && resp.StatusCode == http.StatusNotFound &&
				strings.Contains(req.URL.Path, "/podincidents/") {
				gonePatches.Add(1)
			}
			return resp, err
		})
	})
	mgr, _ := env.StartManagerWithConfig(t, cfg, podbuggertest.Options(env))
	a, b := pod(t, ns, "web-a", podbuggertest.Web, true), pod(t, ns, "web-b", podbuggertest.Web, true)
	pb := podbuggertest.Recorder(t, env, ns, []debugv1beta1.Trigger{debugv1beta1.TriggerError, debugv1beta1.TriggerCrashLoopBackOff}, func(pb *debugv1beta1.PodBugger) {
		pb.Spec.Incidents = &debugv1beta1.IncidentPolicy{MaxRecords: 1}
	})
	g.Eventually(podbuggertest.Status(env, pb)).Should(podbuggertest.Condition(debugv1beta1.ConditionReady, metav1.ConditionTrue, debugv1beta1.ReasonCaptureOnly))

	t0 := time.Now().Add(-time.Minute).Truncate(time.Second)
	podbuggertest.Crash(t, env, a, 2, 1, t0, true)
	g.Eventually(podbuggertest.IncidentsIn(env, ns)).Should(ConsistOf(HaveField("Spec.Pod.Name", "web-a")))
	// Another pod's later failure takes the only place (pod web-a has no
	// event meanwhile: the recorder never saw web-a's record in its cache).
	podbuggertest.Crash(t, env, b, 2, 1, t0.Add(10*time.Second), true)
	g.Eventually(podbuggertest.IncidentsIn(env, ns)).Should(ConsistOf(HaveField("Spec.Pod.Name", "web-b")))
	g.Eventually(func() ([]debugv1beta1.PodIncident, error) { // the manager's cache too
		list := &debugv1beta1.PodIncidentList{}
		err := mgr.GetClient().List(ctx, list, client.InNamespace(ns))
		return list.Items, err
	}).Should(ConsistOf(HaveField("Spec.Pod.Name", "web-b")))
	armed.Store(true)

	// The pod's pruned failure, seen again, was counted: it is not
	// recorded a second time.
	podbuggertest.Crash(t, env, a, 2, 1, t0, true)
	g.Consistently(podbuggertest.IncidentsIn(env, ns)).Should(ConsistOf(HaveField("Spec.Pod.Name", "web-b")))

	podbuggertest.Crash(t, env, a, 3, 1, t0.Add(20*time.Second), true)
	g.Eventually(podbuggertest.IncidentsIn(env, ns)).Should(ConsistOf(And(HaveField("Spec.Pod.Name", "web-a"), HaveField("Spec.Count", int32(1)),
		HaveField("Spec.LastFailure.ContainerID", "containerd://instance-3"))))
	g.Expect(gonePatches.Load()).To(BeZero(), "PATCHes of a pruned record")
	g.Expect(env.Client.Delete(ctx, pb)).To(Succeed())
	g.Eventually(env.Exists(pb)).Should(BeFalse())
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
