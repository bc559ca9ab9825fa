package manager_test

import (
	"context"
	"net"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/internal/testenv/faultinject"
)

// A replica that does not lead keeps warm: its controllers' informers are
// listed and synced while another replica holds the Lease, and it writes
// nothing until it leads. When it wins the Lease it acts at once, without
// listing again what it already holds.
func TestFollowerIsWarmAndWritesNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)

	opts := env.ManagerOptions()
	opts.LeaderElect = true
	opts.LeaderElectionNamespace = ns
	opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = 4*time.Second, 3*time.Second, 500*time.Millisecond
	_, port, err := net.SplitHostPort(testenv.FreeAddr(t))
	g.Expect(err).NotTo(HaveOccurred())
	opts.WebhookPort, err = strconv.Atoi(port)
	g.Expect(err).NotTo(HaveOccurred())

	// Another replica leads, and keeps leading until the test lets go.
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: opts.LeaderElectionID},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To("another-replica"),
			LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime:          &metav1.MicroTime{Time: time.Now()},
			RenewTime:            &metav1.MicroTime{Time: time.Now()},
		},
	}
	g.Expect(env.Client.Create(ctx, lease)).To(Succeed())

	requests := &requestLog{}
	follower, _ := env.StartManagerWithConfig(t, requests.config(env.Config), opts)

	// A PodSet and a ModelBox made while the follower waits (through its
	// webhooks: every replica serves them).
	set := &appsv1beta1.PodSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "warm"},
		Spec:       appsv1beta1.PodSetSpec{Replicas: 2},
	}
	g.Eventually(func() error { return env.Client.Create(ctx, set) }).WithTimeout(30 * time.Second).Should(Succeed())
	box := &modelv1.ModelBox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "warm"},
		Spec: modelv1.ModelBoxSpec{
			Name: "nginx", Image: "nginx:1.7.9", Replicas: ptr.To[int32](1),
			Ports: []modelv1.ServicePort{{Port: 80, TargetPort: ptr.To(intstr.FromInt32(80))}},
		},
	}
	g.Expect(env.Client.Create(ctx, box)).To(Succeed())

	// Warm: the follower lists and watches what its controllers read
	// (the kinds only a controller's watch asks for, too: a ModelBox's
	// Deployment and Service) before it leads.
	warm := []string{"podsets", "pods", "modelboxes", "deployments", "services"}
	g.Eventually(requests.watched).WithTimeout(30 * time.Second).Should(ContainElements(warm))
	// And silent: no write of any kind, no pod, no Deployment, no status.
	g.Consistently(requests.writes).WithTimeout(3 * time.Second).Should(BeEmpty())
	g.Expect(follower.Elected()).NotTo(BeClosed())
	pods := &corev1.PodList{}
	g.Expect(env.Client.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
	g.Expect(pods.Items).To(BeEmpty())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(box), &appsv1.Deployment{})).NotTo(Succeed())

	// The other replica goes; the follower takes over and acts.
	listsBefore := requests.lists(warm...)
	g.Expect(env.Client.Delete(ctx, lease)).To(Succeed())
	g.Eventually(follower.Elected()).WithTimeout(30 * time.Second).Should(BeClosed())
	g.Eventually(func() ([]corev1.Pod, error) {
		err := env.Client.List(ctx, pods, client.InNamespace(ns))
		return pods.Items, err
	}).WithTimeout(10 * time.Second).Should(HaveLen(2))
	g.Eventually(env.Exists(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: box.Name}})).
		WithTimeout(10 * time.Second).Should(BeTrue())
	// Nothing was listed again to get there: the caches were warm.
	g.Expect(requests.lists(warm...)).To(Equal(listsBefore))
}

// requestLog records what a manager asks of the apiserver: reads as
// "LIST path" or "WATCH path", writes as "METHOD path".
type requestLog struct {
	mu        sync.Mutex
	readSeen  []string
	writeSeen []string
}

func (l *requestLog) config(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return faultinject.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			l.note(req)
			return rt.RoundTrip(req)
		})
	})
	return out
}

func (l *requestLog) note(req *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case req.Method == http.MethodGet && req.URL.Query().Get("watch") == "true":
		l.readSeen = append(l.readSeen, "WATCH "+req.URL.Path)
	case req.Method == http.MethodGet:
		l.readSeen = append(l.readSeen, "LIST "+req.URL.Path) // a GET of one object too: counted, never matched
	default:
		l.writeSeen = append(l.writeSeen, req.Method+" "+req.URL.Path)
	}
}

// watched are the resources (podsets, pods, …) watched so far.
func (l *requestLog) watched() []string {
	var out []string
	for _, r := range l.reads() {
		if strings.HasPrefix(r, "WATCH ") {
			out = append(out, path.Base(r))
		}
	}
	return out
}

func (l *requestLog) reads() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.readSeen...)
}

func (l *requestLog) writes() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.writeSeen...)
}

// lists is how many lists and watches of these resources were started:
// each is an informer listing (with watch-list, a watch that sends the
// list first).
func (l *requestLog) lists(resources ...string) int {
	n := 0
	for _, r := range l.reads() {
		if slices.Contains(resources, path.Base(r)) {
			n++
		}
	}
	return n
}
