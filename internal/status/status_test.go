package status_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/status"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

var ctx = context.Background()

// patchCounter counts the status patches that reach the apiserver.
type patchCounter struct {
	client.Client
	patches int
}

func (c *patchCounter) Status() client.SubResourceWriter {
	return countingWriter{SubResourceWriter: c.Client.Status(), n: &c.patches}
}

type countingWriter struct {
	client.SubResourceWriter
	n *int
}

func (w countingWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	*w.n++
	return w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

func newSet(t *testing.T) *appsv1beta1.PodSet {
	set := &appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace(t), Name: "s"}}
	env.Create(t, set)
	return set
}

func serverStatus(g Gomega, set *appsv1beta1.PodSet) appsv1beta1.PodSetStatus {
	got := &appsv1beta1.PodSet{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(set), got)).To(Succeed())
	return got.Status
}

// A status that goes A -> B -> A while the cache still shows A must end as
// A on the server: a cached copy that looks equal is not what the server
// holds.
func TestWriteIsNotFooledByACacheThatLooksEqual(t *testing.T) {
	g := NewWithT(t)
	set := newSet(t)
	w := status.NewWriter[appsv1beta1.PodSetStatus](env.Client)
	a := appsv1beta1.PodSetStatus{Replicas: 1, PodNames: []string{"a"}}
	b := appsv1beta1.PodSetStatus{Replicas: 2, PodNames: []string{"a", "b"}}

	g.Expect(w.Write(ctx, set, &set.Status, a)).Error().To(Succeed())
	stale := set.DeepCopy() // what the cache shows for a while: status A
	g.Expect(w.Write(ctx, set, &set.Status, b)).Error().To(Succeed())
	g.Expect(serverStatus(g, set)).To(Equal(b))

	g.Expect(w.Write(ctx, stale, &stale.Status, a)).Error().To(Succeed())
	g.Expect(serverStatus(g, set)).To(Equal(a), "the stale copy's status was taken for the server's")
}

// The write replaces the whole status: a field the server holds but the
// (stale) copy never showed does not survive it, as it would a merge patch.
func TestWriteLeavesNoStaleField(t *testing.T) {
	g := NewWithT(t)
	set := newSet(t)
	stale := set.DeepCopy()
	set.Status = appsv1beta1.PodSetStatus{Replicas: 1, PodNames: []string{"gone"}, Selector: "app=x"}
	g.Expect(env.Client.Status().Update(ctx, set)).To(Succeed())

	want := appsv1beta1.PodSetStatus{Replicas: 2}
	g.Expect(status.NewWriter[appsv1beta1.PodSetStatus](env.Client).Write(ctx, stale, &stale.Status, want)).Error().To(Succeed())
	g.Expect(serverStatus(g, set)).To(Equal(want))
	g.Expect(stale.Status).To(Equal(want), "the copy shows what the server answered")
}

// Nothing is sent when the server already holds the status, including right
// after the Writer's own write, before the cache shows it.
func TestWriteSendsNothingWhenNothingChanged(t *testing.T) {
	g := NewWithT(t)
	set := newSet(t)
	c := &patchCounter{Client: env.Client}
	w := status.NewWriter[appsv1beta1.PodSetStatus](c)
	want := appsv1beta1.PodSetStatus{Replicas: 3, PodNames: []string{"a", "b", "c"}}

	stale := set.DeepCopy()
	g.Expect(w.Write(ctx, set, &set.Status, want)).Error().To(Succeed())
	g.Expect(w.Write(ctx, set, &set.Status, want)).Error().To(Succeed())
	g.Expect(w.Write(ctx, stale, &stale.Status, want)).Error().To(Succeed())
	g.Expect(c.patches).To(Equal(1))
}

// A Paced Writer writes the first change at once, holds back later ones
// until the interval has passed (saying how long is left), writes an urgent
// one at once, and never holds back the change the caller comes back with.
func TestPacedWriterHoldsBackChangesWithinTheInterval(t *testing.T) {
	g := NewWithT(t)
	set := newSet(t)
	c := &patchCounter{Client: env.Client}
	const interval = time.Second
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var now time.Time
	var urgentNow func(held, want *appsv1beta1.PodSetStatus) bool
	w := status.NewWriter(c, status.Paced(interval, func() time.Time { return now },
		func(obj client.Object, held, want *appsv1beta1.PodSetStatus) bool {
			g.Expect(obj.GetUID()).To(Equal(set.UID), "urgent is asked about the object written")
			return urgentNow(held, want)
		}))
	notUrgent := func(_, _ *appsv1beta1.PodSetStatus) bool { return false }
	write := func(replicas int32, at time.Duration, u func(_, _ *appsv1beta1.PodSetStatus) bool) time.Duration {
		now, urgentNow = t0.Add(at), u
		wait, err := w.Write(ctx, set, &set.Status, appsv1beta1.PodSetStatus{Replicas: replicas})
		g.Expect(err).NotTo(HaveOccurred())
		return wait
	}

	g.Expect(write(1, 0, notUrgent)).To(BeZero(), "the first change")
	g.Expect(write(2, 300*time.Millisecond, notUrgent)).To(Equal(700*time.Millisecond), "within the interval")
	g.Expect(write(3, 600*time.Millisecond, notUrgent)).To(Equal(400 * time.Millisecond))
	g.Expect(c.patches).To(Equal(1))
	g.Expect(serverStatus(g, set).Replicas).To(Equal(int32(1)))

	g.Expect(write(3, time.Second, notUrgent)).To(BeZero(), "the interval has passed")
	g.Expect(serverStatus(g, set).Replicas).To(Equal(int32(3)))

	urgent := func(held, want *appsv1beta1.PodSetStatus) bool { return held.Replicas == 3 && want.Replicas == 4 }
	g.Expect(write(4, time.Second+time.Millisecond, urgent)).To(BeZero(), "an urgent change")
	g.Expect(c.patches).To(Equal(3))
	g.Expect(serverStatus(g, set).Replicas).To(Equal(int32(4)))

	g.Expect(write(4, time.Second+2*time.Millisecond, notUrgent)).To(BeZero(), "nothing to write")
	g.Expect(c.patches).To(Equal(3))
}

func TestWriteToADeletedObjectIsNoError(t *testing.T) {
	g := NewWithT(t)
	set := newSet(t)
	g.Expect(env.Client.Delete(ctx, set)).To(Succeed())
	w := status.NewWriter[appsv1beta1.PodSetStatus](env.Client)
	g.Expect(w.Write(ctx, set, &set.Status, appsv1beta1.PodSetStatus{Replicas: 1})).Error().To(Succeed())
}

func TestSetCondition(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	now := metav1.NewTime(t0.Add(time.Hour + 600*time.Millisecond))
	nowSeconds := metav1.NewTime(t0.Add(time.Hour))
	ready := func(st metav1.ConditionStatus, reason string, at metav1.Time) metav1.Condition {
		return metav1.Condition{Type: "Ready", Status: st, Reason: reason, Message: reason, ObservedGeneration: 2, LastTransitionTime: at}
	}
	other := metav1.Condition{Type: "Other", Status: metav1.ConditionTrue, Reason: "X", LastTransitionTime: t0}
	tests := map[string]struct {
		before []metav1.Condition
		set    metav1.Condition
		want   []metav1.Condition
	}{
		"new condition is stamped now, in whole seconds": {
			before: []metav1.Condition{other},
			set:    ready(metav1.ConditionTrue, "A", metav1.Time{}),
			want:   []metav1.Condition{other, ready(metav1.ConditionTrue, "A", nowSeconds)},
		},
		"same status keeps the transition time, takes the new reason": {
			before: []metav1.Condition{ready(metav1.ConditionTrue, "A", t0)},
			set:    ready(metav1.ConditionTrue, "B", now),
			want:   []metav1.Condition{ready(metav1.ConditionTrue, "B", t0)},
		},
		"changed status is stamped now": {
			before: []metav1.Condition{ready(metav1.ConditionTrue, "A", t0), other},
			set:    ready(metav1.ConditionFalse, "B", t0),
			want:   []metav1.Condition{ready(metav1.ConditionFalse, "B", nowSeconds), other},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			conds := append([]metav1.Condition(nil), tt.before...)
			status.SetCondition(&conds, tt.set, now)
			if !equality.Semantic.DeepEqual(conds, tt.want) {
				t.Errorf("got %+v\nwant %+v", conds, tt.want)
			}
		})
	}
}

// With ConditionMetrics, deckhand_status_condition shows each condition the
// apiserver holds (1 True, 0 False, -1 Unknown), labelled with its current
// reason only, also when the write sends nothing; Forget drops the series.
func TestConditionMetrics(t *testing.T) {
	g := NewWithT(t)
	set := newSet(t)
	key := client.ObjectKeyFromObject(set)
	w := status.NewWriter(env.Client, status.ConditionMetrics("PodSet", func(s *appsv1beta1.PodSetStatus) []metav1.Condition { return s.Conditions }))
	labels := func(typ, reason string) map[string]string {
		l := map[string]string{"kind": "PodSet", "namespace": key.Namespace, "name": key.Name}
		if typ != "" {
			l["type"] = typ
		}
		if reason != "" {
			l["reason"] = reason
		}
		return l
	}
	cond := func(typ string, st metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: st, Reason: reason, Message: "m", LastTransitionTime: metav1.Now().Rfc3339Copy()}
	}
	value := func(typ, reason string) float64 {
		v, err := testenv.Metric("deckhand_status_condition", labels(typ, reason))
		g.Expect(err).NotTo(HaveOccurred())
		return v
	}
	series := func(typ, reason string) int {
		n, err := testenv.MetricSeries("deckhand_status_condition", labels(typ, reason))
		g.Expect(err).NotTo(HaveOccurred())
		return n
	}

	failing := appsv1beta1.PodSetStatus{Conditions: []metav1.Condition{
		cond(appsv1beta1.ConditionReplicaFailure, metav1.ConditionTrue, "FailedCreate"),
		cond(appsv1beta1.ConditionAvailable, metav1.ConditionFalse, "MinimumReplicasUnavailable"),
		cond(appsv1beta1.ConditionProgressing, metav1.ConditionUnknown, "Waiting"),
	}}
	g.Expect(w.Write(ctx, set, &set.Status, failing)).Error().To(Succeed())
	g.Expect(value(appsv1beta1.ConditionReplicaFailure, "FailedCreate")).To(Equal(1.0))
	g.Expect(value(appsv1beta1.ConditionAvailable, "MinimumReplicasUnavailable")).To(Equal(0.0))
	g.Expect(series(appsv1beta1.ConditionAvailable, "")).To(Equal(1))
	g.Expect(value(appsv1beta1.ConditionProgressing, "Waiting")).To(Equal(-1.0))

	// A fresh Writer (a new leader) that finds the status already written
	// sends nothing, and shows it all the same.
	w2 := status.NewWriter(env.Client, status.ConditionMetrics("PodSet", func(s *appsv1beta1.PodSetStatus) []metav1.Condition { return s.Conditions }))
	w.Forget(key)
	g.Expect(series("", "")).To(BeZero())
	g.Expect(w2.Write(ctx, set, &set.Status, failing)).Error().To(Succeed())
	g.Expect(series("", "")).To(Equal(3))

	// Recovered: the old reason's series goes, and a type the status no
	// longer has goes too.
	healthy := appsv1beta1.PodSetStatus{Conditions: []metav1.Condition{
		cond(appsv1beta1.ConditionAvailable, metav1.ConditionTrue, "MinimumReplicasAvailable"),
	}}
	g.Expect(w2.Write(ctx, set, &set.Status, healthy)).Error().To(Succeed())
	g.Expect(series("", "")).To(Equal(1))
	g.Expect(value(appsv1beta1.ConditionAvailable, "MinimumReplicasAvailable")).To(Equal(1.0))

	w2.Forget(key)
	g.Expect(series("", "")).To(BeZero())
}

// Another writer (an older leader's late write, a user's kubectl edit
// --subresource=status) replaced the status the Writer wrote, and the
// cache shows it: the Writer must not take it for its own write the cache
// has not caught up with, and must write the computed status again.
func TestWriteRestoresAStatusSomeoneElseWrote(t *testing.T) {
	g := NewWithT(t)
	set := newSet(t)
	c := &patchCounter{Client: env.Client}
	w := status.NewWriter[appsv1beta1.PodSetStatus](c)
	want := appsv1beta1.PodSetStatus{Replicas: 2, PodNames: []string{"a", "b"}}
	g.Expect(w.Write(ctx, set, &set.Status, want)).Error().To(Succeed())

	other := set.DeepCopy()
	other.Status = appsv1beta1.PodSetStatus{Replicas: 7}
	g.Expect(env.Client.Status().Update(ctx, other)).To(Succeed())
	cached := &appsv1beta1.PodSet{} // what the cache shows once it caught up
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(set), cached)).To(Succeed())

	g.Expect(w.Write(ctx, cached, &cached.Status, want)).Error().To(Succeed())
	g.Expect(serverStatus(g, set)).To(Equal(want), "another writer's status was taken for the Writer's own")
	g.Expect(c.patches).To(Equal(2))
}

// WrittenByOthers wakes the controller for a status another writer
// changed, not for the Writer's own writes nor for changes that leave the
// status alone.
func TestWrittenByOthers(t *testing.T) {
	g := NewWithT(t)
	set := newSet(t)
	w := status.NewWriter[appsv1beta1.PodSetStatus](env.Client)
	p := w.WrittenByOthers()
	before := set.DeepCopy()
	g.Expect(w.Write(ctx, set, &set.Status, appsv1beta1.PodSetStatus{Replicas: 1})).Error().To(Succeed())
	g.Expect(p.Update(event.UpdateEvent{ObjectOld: before, ObjectNew: set})).To(BeFalse(), "its own write")

	labelled := set.DeepCopy()
	labelled.Labels, labelled.ResourceVersion = map[string]string{"a": "b"}, "other"
	g.Expect(p.Update(event.UpdateEvent{ObjectOld: set, ObjectNew: labelled})).To(BeFalse(), "the status did not change")

	other := set.DeepCopy()
	other.Status.Replicas = 9
	g.Expect(env.Client.Status().Update(ctx, other)).To(Succeed())
	g.Expect(p.Update(event.UpdateEvent{ObjectOld: set, ObjectNew: other})).To(BeTrue(), "another writer's status")
}

// A cache behind the apiserver delivers the Writer's earlier writes late.
// Taken for another writer's, each woke the controller, which computed a
// status from that stale copy and wrote again: a PodSet on a cache 500 ms
// behind wrote its status 139 times in a minute (the fault suite's
// stale-cache run).
func TestAnEarlierOwnWriteDeliveredLateIsNotAnothersWrite(t *testing.T) {
	g := NewWithT(t)
	set := newSet(t)
	w := status.NewWriter[appsv1beta1.PodSetStatus](env.Client)
	p := w.WrittenByOthers()
	before := set.DeepCopy()
	g.Expect(w.Write(ctx, set, &set.Status, appsv1beta1.PodSetStatus{Replicas: 1})).Error().To(Succeed())
	first := set.DeepCopy()
	g.Expect(w.Write(ctx, set, &set.Status, appsv1beta1.PodSetStatus{Replicas: 2})).Error().To(Succeed())
	g.Expect(p.Update(event.UpdateEvent{ObjectOld: before, ObjectNew: first})).To(BeFalse(), "its own first write, delivered late")
}
