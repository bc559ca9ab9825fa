package modelbox_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// requestCounter counts the manager's requests into one namespace by verb
// and resource ("PATCH modelboxes/status", "APPLY deployments"): the
// apiserver's work per ModelBox, which the scale-modelbox bench row
// compares with creating the same Deployment and Service directly.
type requestCounter struct {
	namespace string
	mu        sync.Mutex
	counts    map[string]int
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if key, ok := c.key(req); ok {
			c.mu.Lock()
			c.counts[key]++
			c.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// key names a request into c's namespace as "VERB resource[/subresource]".
func (c *requestCounter) key(req *http.Request) (string, bool) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	i := slices.Index(parts, "namespaces")
	if i < 0 || i+2 >= len(parts) || parts[i+1] != c.namespace {
		return "", false
	}
	tail := parts[i+2:]
	resource := tail[0]
	if len(tail) > 2 {
		resource += "/" + tail[2]
	}
	verb := req.Method
	switch {
	case verb == http.MethodPatch && strings.HasPrefix(req.Header.Get("Content-Type"), "application/apply-patch"):
		verb = "APPLY"
	case verb == http.MethodGet && len(tail) == 1:
		verb = "LIST"
		if req.URL.Query().Get("watch") == "true" {
			verb = "WATCH"
		}
	}
	return verb + " " + resource, true
}

// perBox is each count divided by n.
func (c *requestCounter) perBox(n int) map[string]float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]float64{}
	for k, v := range c.counts {
		out[k] = float64(v) / float64(n)
	}
	return out
}

// playDeploymentController does, once per call, what kube-controller-
// manager does to a new Deployment (envtest runs none): at once it reports
// the ReplicaSet's pod made and not yet available, and rollout after it
// reports the pod available, as kwok's pods are in the bench. The status
// updates go through c from 16 workers, so that at hundreds of boxes a
// rollout still takes about rollout (one at a time, a pass over 200
// Deployments took seconds, and the ModelBoxes' status writes followed the
// test's pace, not the apiserver's).
func playDeploymentController(g Gomega, c client.Client, ns string, rollout time.Duration, started map[string]time.Time) {
	var list appsv1.DeploymentList
	g.Expect(c.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	var due []*appsv1.Deployment
	for i := range list.Items {
		d := &list.Items[i]
		since, seen := started[d.Name]
		switch {
		case !seen:
			d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, UnavailableReplicas: 1,
				Conditions: []appsv1.DeploymentCondition{
					{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable"},
					{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated"},
				}}
			due = append(due, d)
			started[d.Name] = time.Now()
		case d.Status.AvailableReplicas == 1:
		case time.Since(since) >= rollout:
			d.Status = availableStatus(d, 1)
			due = append(due, d)
		}
	}
	parallel(len(due), func(i int) error { return updateStatus(c, due[i]) })
}

// updateStatus writes d's status, read again and written again when the
// manager's apply changed the Deployment since it was listed.
func updateStatus(c client.Client, d *appsv1.Deployment) error {
	want := d.Status
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		err := c.Status().Update(ctx, d)
		if apierrors.IsConflict(err) {
			if gerr := c.Get(ctx, client.ObjectKeyFromObject(d), d); gerr != nil {
				return gerr
			}
			d.Status = want
		}
		return err
	})
}

// A new ModelBox whose Deployment becomes available within the second
// costs one status write, not one saying "0 of 1 pods available" and
// another saying Available, and one read past the cache per child; the
// requests the manager sends per ModelBox
// until it is Available are logged, by verb and resource.
func TestNewModelBoxRequestsUntilAvailable(t *testing.T) {
	const boxes = 10
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	counter := &requestCounter{namespace: ns, counts: map[string]int{}}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(counter.wrap)
	env.StartManagerWithConfig(t, cfg, env.ManagerOptions())

	for i := range boxes {
		// The bench's ModelBox: one replica, one port.
		env.Create(t, &modelv1.ModelBox{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("box-%d", i)},
			Spec: modelv1.ModelBoxSpec{Name: "model", Image: "nginx:1.27", Replicas: ptr.To[int32](1),
				Ports: []modelv1.ServicePort{{Port: 80}}},
		})
	}
	started := map[string]time.Time{}
	allAvailable := func() (int, error) {
		playDeploymentController(g, env.Client, ns, 300*time.Millisecond, started)
		var list modelv1.ModelBoxList
		err := env.Client.List(ctx, &list, client.InNamespace(ns))
		n := 0
		for _, b := range list.Items {
			if meta.IsStatusConditionTrue(b.Status.Conditions, modelv1.ConditionAvailable) {
				n++
			}
		}
		return n, err
	}
	g.Eventually(allAvailable).WithPolling(50 * time.Millisecond).Should(Equal(boxes))
	// Writes still under way when the last one turned Available count too.
	time.Sleep(2 * time.Second)

	per := counter.perBox(boxes)
	keys := make([]string, 0, len(per))
	for k := range per {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		t.Logf("per ModelBox: %-28s %.2f", k, per[k])
	}
	g.Expect(per).To(HaveKeyWithValue("PATCH modelboxes/status", BeNumerically("<=", 1.3)), "status writes per ModelBox")
	// One read past the cache per child, before creating it: not again
	// while the cache catches up with the creation.
	g.Expect(per).To(HaveKeyWithValue("GET services", BeNumerically("<=", 1.1)), "Service reads per ModelBox")
	g.Expect(per).To(HaveKeyWithValue("GET deployments", BeNumerically("<=", 1.1)), "Deployment reads per ModelBox")
}

// Holding the first status back never leaves a slow rollout without one
// for long: a ModelBox whose Deployment does not become available shows
// its progress within about a second.
func TestSlowRolloutStillGetsAStatusAtOnce(t *testing.T) {
	g, box, key := startSeedBox(t, 30024, nil)
	start := time.Now()
	g.Eventually(get(key, box)).WithTimeout(5 * time.Second).Should(HaveField("Status.Conditions",
		testenv.HaveCondition(modelv1.ConditionProgressing, metav1.ConditionTrue, modelv1.ReasonRollingOut)))
	t.Logf("first status after %s", time.Since(start).Round(time.Millisecond))
}
