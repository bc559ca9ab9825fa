package clusterfaults

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	podsetcontroller "github.com/deckhand-dev/deckhand/internal/controller/podset"
	"github.com/deckhand-dev/deckhand/test/cluster"
)

const (
	setName  = "web"
	oldImage = "busybox:1"
	newImage = "busybox:2"
	// settleTimeout bounds how long a PodSet may take to converge after
	// the fault, and the world before it to be reached.
	settleTimeout = 3 * time.Minute
	// electedLog is what the manager logs once it leads
	// (internal/manager).
	electedLog = `"elected leader"`
	// lostLog is what controller-runtime logs when the leader could not
	// renew its Lease; the manager then exits.
	lostLog = "leader election lost"
	// workersLog is what controller-runtime logs when a controller starts
	// reconciling.
	workersLog = `"Starting workers"`
	// restartRenewDeadline is how long a manager whose apiserver restarts
	// keeps trying to renew its Lease.
	restartRenewDeadline = 60 * time.Second
)

// Result is one row of the table.
type Result struct {
	Scenario, Faults string
	// Kills is how many processes were killed.
	Kills      int
	Violations []Violation
	Took       time.Duration
	// Figures are what the run measured, in words.
	Figures string
}

// Restart kills a control-plane process mid-change and starts it again.
type Restart struct {
	// Component is cluster.Apiserver or cluster.Etcd; empty kills
	// nothing: the baseline.
	Component string
	// Size is the PodSet's size: a scale 0→Size, or, with Rollout, a
	// rollout of Size pods (a new image, maxSurge Size/10, maxUnavailable
	// 0).
	Size    int32
	Rollout bool
	// At is how many pods of the new shape run when the process is killed.
	At int
}

// Name is the scenario's name in the table.
func (r Restart) Name() string {
	if r.Rollout {
		return fmt.Sprintf("PodSet rollout of %d, maxSurge %d", r.Size, surge(r.Size))
	}
	return fmt.Sprintf("PodSet scale up 0→%d", r.Size)
}

// RunRestart runs r against c with one manager and returns its row;
// Result.Check fails the test on its violations.
//
// The manager runs with leader election on, as shipped, but with a longer
// renew deadline (restartRenewDeadline): with the shipped 10 s, a leader
// that cannot reach the apiserver for 10 s gives up and exits, to be
// restarted by its Deployment, by design; an apiserver restart took 5–9 s
// on the 2-core development machine, too close to that for a test of
// recovery without a restart.
func RunRestart(t *testing.T, c *cluster.Cluster, r Restart) Result {
	began := time.Now()
	res := Result{Scenario: r.Name(), Faults: r.Component + " killed (SIGKILL) mid-change and restarted", Kills: 1}
	if r.Component == "" {
		res.Faults, res.Kills = "none (the baseline for the restarts' times)", 0
	}
	ps := newPodSet(t, c, r.Size, r.Rollout)
	m := c.RunManager(t, append(managerFlags(ps.ns, true),
		"--leader-elect-renew-deadline", restartRenewDeadline.String(), "--leader-elect-lease-duration", (restartRenewDeadline+5*time.Second).String())...)
	ps.start(t)
	waitReached(t, ps.obs, r.At)
	killedAt := ps.obs.runningNow()
	killed := time.Now()
	var outage time.Duration
	if r.Component != "" {
		var err error
		if outage, err = c.RestartComponent(r.Component, 0); err != nil {
			t.Fatal(err)
		}
	}
	converged := "did not converge"
	if ps.converge(t, m) {
		converged = fmt.Sprintf("converged %s later", time.Since(killed.Add(outage)).Round(100*time.Millisecond))
	}
	checkAlive(ps.obs, m)
	fault := fmt.Sprintf("killed at %d of %d pods; the apiserver was ready again %s after the kill", killedAt, r.Size, outage.Round(100*time.Millisecond))
	if r.Component == "" {
		fault = fmt.Sprintf("no fault; %d of %d pods ran", killedAt, r.Size)
	}
	res.Violations, res.Figures = ps.finish(t, fault+"; "+converged)
	res.Took = time.Since(began)
	return res
}

// Failover kills the leader of two managers mid-scale.
type Failover struct {
	// Size is the PodSet's size (scale 0→Size); At is how many pods run
	// when the leader is killed.
	Size int32
	At   int
	// SplitBrain runs the second manager without leader election and
	// kills no one: both reconcile at once. For the self-test that the
	// checks catch it.
	SplitBrain bool
}

// Name is the scenario's name in the table.
func (f Failover) Name() string { return fmt.Sprintf("PodSet scale up 0→%d", f.Size) }

// RunFailover runs f against c and returns its row (Result.Check fails
// the test on its violations): two managers with
// leader election as shipped (Lease 15 s, renew deadline 10 s, retry 2 s);
// the leader is killed with SIGKILL, so it does not release the Lease and
// the other takes over once the Lease expires.
func RunFailover(t *testing.T, c *cluster.Cluster, f Failover) Result {
	began := time.Now()
	res := Result{Scenario: f.Name(), Faults: "leader killed (SIGKILL) mid-scale, the other manager takes over", Kills: 1}
	if f.SplitBrain {
		res.Faults = "second manager without leader election (self-test)"
	}
	ps := newPodSet(t, c, f.Size, false)
	leader := c.RunManager(t, managerFlags(ps.ns, true)...)
	waitLog(t, leader, electedLog, 2*time.Minute)
	standby := c.RunManager(t, managerFlags(ps.ns, !f.SplitBrain)...)
	if f.SplitBrain {
		// Ready is not reconciling yet: a PodSet made before both
		// reconcile is all made by one.
		waitLog(t, standby, workersLog, 2*time.Minute)
		// A manager starts caching a namespace's pods on its first look
		// at a PodSet there (internal/scopedcache): one that looks a
		// moment later lists the other's pods already and makes none. The
		// PodSet is made empty first, so that both hold an empty view of
		// the namespace when it grows.
		ps.createEmpty(t)
	}
	ps.start(t)
	if f.SplitBrain {
		ps.converge(t, standby)
		res.Kills = 0
		res.Violations, res.Figures = ps.finish(t, "both managers reconciled")
		res.Took = time.Since(began)
		return res
	}
	waitReached(t, ps.obs, f.At)
	killedAt := ps.obs.runningNow()
	if err := leader.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("killing the leader: %v", err)
	}
	killed := time.Now()
	<-leader.Done()
	waitLog(t, standby, electedLog, 2*time.Minute)
	takeover := time.Since(killed)
	converged := "did not converge"
	if ps.converge(t, standby) {
		converged = fmt.Sprintf("converged %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	}
	checkAlive(ps.obs, standby)
	res.Violations, res.Figures = ps.finish(t, fmt.Sprintf("leader killed at %d of %d pods; the other took over %s after the kill; %s",
		killedAt, f.Size, takeover.Round(100*time.Millisecond), converged))
	res.Took = time.Since(began)
	return res
}

// CatchSplitBrain is the self-test that the checks can fail: two managers
// without leader election (RunFailover's SplitBrain), each run in a subtest
// of its own so that its managers stop with it, up to attempts times,
// until the bound check fires. Whether both managers create before either
// sees the other's pods is a race (one can make them all first), so one
// run may not overshoot; the checks must catch it when one does. It
// returns the last run and whether the bound check caught it.
func CatchSplitBrain(t *testing.T, c *cluster.Cluster, size int32, attempts int) (Result, bool) {
	var res Result
	for i := range attempts {
		t.Run(fmt.Sprintf("attempt %d", i+1), func(t *testing.T) {
			res = RunFailover(t, c, Failover{Size: size, SplitBrain: true})
			t.Log(res.Figures)
		})
		if slices.ContainsFunc(res.Violations, func(v Violation) bool { return v.Check == CheckBound }) {
			return res, true
		}
	}
	return res, false
}

// managerFlags runs the PodSet controller alone, with leader election as
// shipped or none, on a Lease of the test's own.
func managerFlags(ns string, elect bool) []string {
	return []string{fmt.Sprintf("--leader-elect=%t", elect), "--leader-election-id", "deckhand-faults-" + ns,
		"--controllers", podsetcontroller.ControllerName, "--zap-log-level", "info"}
}

// podSet is one scenario's PodSet, its namespace and observer.
type podSet struct {
	c       *cluster.Cluster
	ns      string
	size    int32
	rollout bool
	obs     *observer
	// empty is the PodSet createEmpty made, which start scales.
	empty *appsv1beta1.PodSet
}

func surge(size int32) int32 { return max(1, size/10) }

// newPodSet makes a namespace with the pods the PodSet must leave alone
// (one with its label that another controller owns, one it does not
// select) and starts observing it.
func newPodSet(t *testing.T, c *cluster.Cluster, size int32, rollout bool) *podSet {
	ctx := context.Background()
	ns := c.Namespace(t, nil)
	// The other controller is a ConfigMap: an owner that exists, so the
	// garbage collector keeps its pod, and that reconciles nothing.
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other-controller"}}
	must(t, c.Client.Create(ctx, owner))
	foreign := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "foreign",
		Labels: map[string]string{appsv1beta1.PodSetLabel: setName},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name,
			UID: owner.UID, Controller: new(true)}}}, Spec: podSpec(oldImage)}
	orphan := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orphan",
		Labels: map[string]string{"app": setName}}, Spec: podSpec(oldImage)}
	must(t, c.Client.Create(ctx, foreign))
	must(t, c.Client.Create(ctx, orphan))
	bound := size
	if rollout {
		bound += surge(size)
	}
	obs := newObserver(c.Clientset, ns, setName, int(bound), map[string]types.UID{foreign.Name: owner.UID, orphan.Name: ""})
	obs.run(t)
	return &podSet{c: c, ns: ns, size: size, rollout: rollout, obs: obs}
}

// start creates the PodSet; for a rollout, it waits until the PodSet
// runs the old image, then changes the image.
func (ps *podSet) start(t *testing.T) {
	ctx := context.Background()
	if ps.empty != nil {
		ps.obs.setTarget(oldImage)
		patch := client.MergeFrom(ps.empty.DeepCopy())
		ps.empty.Spec.Replicas = ps.size
		must(t, ps.c.Client.Patch(ctx, ps.empty, patch))
		return
	}
	set := ps.newSet(ps.size)
	if ps.rollout {
		s, u := intstr.FromInt32(surge(ps.size)), intstr.FromInt32(0)
		set.Spec.UpdateStrategy.RollingUpdate.MaxSurge, set.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = &s, &u
	}
	ps.obs.setTarget(oldImage)
	must(t, ps.c.Client.Create(ctx, set))
	if !ps.rollout {
		return
	}
	if err := ps.waitSettled(oldImage, nil); err != nil {
		t.Fatalf("waiting for the PodSet before the rollout: %v", err)
	}
	ps.obs.setTarget(newImage)
	patch := client.MergeFrom(set.DeepCopy())
	set.Spec.Template.Spec.Containers[0].Image = newImage
	must(t, ps.c.Client.Patch(ctx, set, patch))
}

// newSet is the scenario's PodSet with replicas pods of the old image.
func (ps *podSet) newSet(replicas int32) *appsv1beta1.PodSet {
	return &appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: ps.ns, Name: setName},
		Spec: appsv1beta1.PodSetSpec{Replicas: replicas, Template: &corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"tier": "web"}}, Spec: podSpec(oldImage)}}}
}

// createEmpty makes the PodSet with no pods, which start then scales to
// its size, and waits until a manager has reconciled it and both have had
// a moment to.
func (ps *podSet) createEmpty(t *testing.T) {
	ctx := context.Background()
	set := ps.newSet(0)
	must(t, ps.c.Client.Create(ctx, set))
	for deadline := time.Now().Add(time.Minute); set.Status.ObservedGeneration != set.Generation; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no manager reconciled the empty PodSet in a minute")
		}
		must(t, ps.c.Client.Get(ctx, client.ObjectKeyFromObject(set), set))
	}
	time.Sleep(2 * time.Second)
	ps.empty = set
}

// converge waits for the end state, reached by m, and reports whether it
// was; not reaching it is a violation.
func (ps *podSet) converge(t *testing.T, m *cluster.Process) bool {
	image := oldImage
	if ps.rollout {
		image = newImage
	}
	if err := ps.waitSettled(image, m); err != nil {
		ps.obs.violate(CheckConverges, "%v", err)
		t.Logf("not converged: %v", err)
		return false
	}
	return true
}

// waitSettled waits until settled, or until m (if any) exits.
func (ps *podSet) waitSettled(image string, m *cluster.Process) error {
	deadline := time.Now().Add(settleTimeout)
	for {
		err := ps.settled(image)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %w", settleTimeout, err)
		}
		if m != nil && m.Exited() {
			return fmt.Errorf("the manager exited: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// settled is nil once exactly size pods of the PodSet live, all ready and
// of image, and its status says so for its current generation.
func (ps *podSet) settled(image string) error {
	ctx := context.Background()
	set := &appsv1beta1.PodSet{}
	if err := ps.c.Client.Get(ctx, client.ObjectKey{Namespace: ps.ns, Name: setName}, set); err != nil {
		return err
	}
	var pods corev1.PodList
	if err := ps.c.Client.List(ctx, &pods, client.InNamespace(ps.ns)); err != nil {
		return err
	}
	n := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		if !ps.obs.ownedLive(p) {
			continue
		}
		if p.Spec.Containers[0].Image != image {
			return fmt.Errorf("pod %s still runs %s", p.Name, p.Spec.Containers[0].Image)
		}
		n++
	}
	st := set.Status
	switch {
	case n != int(ps.size):
		return fmt.Errorf("%d live pods, want %d", n, ps.size)
	case st.ObservedGeneration != set.Generation:
		return fmt.Errorf("status describes generation %d of %d", st.ObservedGeneration, set.Generation)
	case st.Replicas != ps.size || st.UpdatedReplicas != ps.size || st.ReadyReplicas != ps.size:
		return fmt.Errorf("status says %d replicas, %d updated, %d ready; want %d", st.Replicas, st.UpdatedReplicas, st.ReadyReplicas, ps.size)
	}
	return nil
}

// Check fails the test on each of r's violations.
func (r Result) Check(t *testing.T) {
	t.Helper()
	for _, v := range r.Violations {
		t.Errorf("violated: %s", v)
	}
}

// finish returns the violations with the figures, completed by the
// observer's.
func (ps *podSet) finish(t *testing.T, figures string) ([]Violation, string) {
	vs, maxLive, relists := ps.obs.report()
	figures += fmt.Sprintf("; at most %d live pods (bound %d); the observer relisted %d times", maxLive, ps.obs.bound, relists)
	t.Log(figures)
	return vs, figures
}

// checkAlive records a violation if the manager exited or gave up its
// leadership: it must ride out the fault on its own.
func checkAlive(obs *observer, m *cluster.Process) {
	if m.Exited() {
		obs.violate(CheckAlive, "the manager exited")
	}
	if strings.Contains(m.Logs(), lostLog) {
		obs.violate(CheckAlive, "the manager lost its leadership")
	}
}

// waitReached waits until at pods of the new shape run.
func waitReached(t *testing.T, obs *observer, at int) {
	select {
	case <-obs.reached(at):
	case <-time.After(settleTimeout):
		t.Fatalf("%d pods never ran (%d do)", at, obs.runningNow())
	}
}

// waitLog waits until m has logged s, polling every 50 ms.
func waitLog(t *testing.T, m *cluster.Process, s string, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for !strings.Contains(m.Logs(), s) {
		if m.Exited() || time.Now().After(deadline) {
			t.Fatalf("the manager did not log %s (exited: %t)", s, m.Exited())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func podSpec(image string) corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: image, Command: []string{"sleep", "3600"}}}}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
