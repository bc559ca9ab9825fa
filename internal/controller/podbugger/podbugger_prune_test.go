package podbugger_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/podbuggertest"
	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/internal/testenv/faultinject"
)

// servingLogs is a copy of the test apiserver's config whose client answers
// every read of a pod log in ns with log, as a kubelet would: envtest has
// none.
func servingLogs(ns, log string) *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return faultinject.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if strings.HasPrefix(req.URL.Path, "/api/v1/namespaces/"+ns+"/pods/") && strings.HasSuffix(req.URL.Path, "/log") {
				return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/plain"}},
					Body: io.NopCloser(strings.NewReader(log)), Request: req}, nil
			}
			return rt.RoundTrip(req)
		})
	})
	return cfg
}

// TestARecordsLogGoesWithItsPod: a record keeps its failed instance's log
// while the pod is there. Once the pod is deleted, the record keeps what
// failed and why, and its log goes (logError says so), unless the
// PodBugger asks to keep it (incidents.keepLogsAfterPodDeletion).
func TestARecordsLogGoesWithItsPod(t *testing.T) {
	const log = "connecting to db.internal:5432\nerror: connection refused\n"
	for name, keep := range map[string]bool{"by default": false, "keepLogsAfterPodDeletion": true} {
		t.Run(name, func(t *testing.T) {
			g := testenv.NewG(t)
			ns := env.Namespace(t)
			env.StartManagerWithConfig(t, servingLogs(ns, log), podbuggertest.Options(env))
			web1 := pod(t, ns, "web-1", podbuggertest.Web, true)
			podbuggertest.Recorder(t, env, ns, []debugv1beta1.Trigger{debugv1beta1.TriggerError}, func(pb *debugv1beta1.PodBugger) {
				pb.Spec.Incidents = &debugv1beta1.IncidentPolicy{KeepLogsAfterPodDeletion: keep}
			})
			podbuggertest.Crash(t, env, web1, 1, 1, time.Now().Add(-time.Second), false)
			g.Eventually(podbuggertest.IncidentsIn(env, ns)).Should(ConsistOf(And(
				HaveField("Spec.Pod.Name", "web-1"), HaveField("Spec.LogTail", log))))

			g.Expect(env.Client.Delete(ctx, web1, client.GracePeriodSeconds(0))).To(Succeed())
			g.Eventually(env.Exists(web1)).Should(BeFalse())
			if keep {
				g.Consistently(podbuggertest.IncidentsIn(env, ns)).WithTimeout(3*time.Second).Should(ConsistOf(
					HaveField("Spec.LogTail", log)), "the PodBugger keeps logs after its pods are gone")
				return
			}
			g.Eventually(podbuggertest.IncidentsIn(env, ns)).Should(ConsistOf(And(
				HaveField("Spec.Pod.Name", "web-1"), HaveField("Spec.Reason", debugv1beta1.IncidentError),
				HaveField("Spec.LastFailure.ExitCode", int32(1)),
				HaveField("Spec.LogTail", BeEmpty()),
				HaveField("Spec.LogError", ContainSubstring("keepLogsAfterPodDeletion")),
				// Each instance loses its log, and only its log.
				HaveField("Spec.Instances", ConsistOf(And(HaveField("LogTail", BeEmpty()),
					HaveField("LogError", ContainSubstring("keepLogsAfterPodDeletion")),
					HaveField("Message", Not(BeEmpty())), HaveField("ExitCode", int32(1))))))),
				"the record of a deleted pod still holds its log")
		})
	}
}
