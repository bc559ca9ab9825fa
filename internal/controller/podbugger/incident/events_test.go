package incident

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
)

// The incident recorder's Events wait in a bounded queue and are kept
// nowhere once written: client-go's broadcaster kept every one it sent for
// 6 to 12 minutes (none is ever alike: each names its pod at the version
// that failed), 28% of the crash-loop row's heap at its end. Beyond its
// namespace's share an Event is dropped (and counted), never blocking the
// recorder, and never another namespace's: a tenant whose pods fail by the
// hundred leaves another tenant's Event a place, written in its turn, next,
// not after the storm's. What is queued is the Event client-go's recorder
// would have written.
func TestIncidentEventsAreQueuedBoundedFairlyAndKeptNowhere(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), debugv1beta1.AddToScheme(scheme)); err != nil {
		t.Fatal(err)
	}
	e := newEventWriter(scheme, nil, reportingController) // nothing writes: Start is not run
	e.now = func() time.Time { return time.Date(2026, 11, 26, 18, 0, 0, 0, time.UTC) }
	pb := &debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: "noisy", Name: "pb", UID: types.UID("pb-uid")}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "noisy", Name: "web-1", UID: types.UID("pod-uid"), ResourceVersion: "42"}}
	droppedBefore := droppedEvents(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range maxQueuedEvents + 10 {
			e.Eventf(pb, pod, corev1.EventTypeWarning, EventIncidentRecorded, "RecordIncident", "failure %d", i)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the recorder blocked on a full queue")
	}
	if n := e.queue.waiting(); n != maxQueuedEventsPerNamespace {
		t.Fatalf("%d Events of one namespace queued, want its share %d", n, maxQueuedEventsPerNamespace)
	}
	if got := droppedEvents(t) - droppedBefore; got != maxQueuedEvents+10-maxQueuedEventsPerNamespace {
		t.Errorf("%g Events counted dropped, want %d", got, maxQueuedEvents+10-maxQueuedEventsPerNamespace)
	}
	quietPB, quietPod := pb.DeepCopy(), pod.DeepCopy()
	quietPB.Namespace, quietPod.Namespace = "quiet", "quiet"
	e.Eventf(quietPB, quietPod, corev1.EventTypeWarning, EventIncidentRecorded, "RecordIncident", "the quiet one")

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	got := make([]string, 0, 3)
	for range 3 {
		ev, ns, ok := e.queue.next(ctx)
		if !ok {
			t.Fatal("no Event queued")
		}
		got = append(got, ev.Namespace+": "+ev.Note)
		if ns != ev.Namespace {
			t.Errorf("an Event of %s served as one of %s", ev.Namespace, ns)
		}
		if ev.Namespace == "noisy" && ev.Note == "failure 0" && !asClientGoWrites(ev) {
			t.Errorf("queued Event %+v", ev)
		}
		e.queue.finish(ns)
	}
	if want := []string{"noisy: failure 0", "quiet: the quiet one", "noisy: failure 1"}; !slices.Equal(got, want) {
		t.Errorf("Events written in the order %q, want %q", got, want)
	}
}

// droppedEvents is the count of Events dropped.
func droppedEvents(t *testing.T) float64 {
	t.Helper()
	m := &dto.Metric{}
	if err := dropped.WithLabelValues(droppedEvent).Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// asClientGoWrites reports whether ev, the first noisy Event, is the Event
// client-go's recorder would have written.
func asClientGoWrites(ev *eventsv1.Event) bool {
	return ev.Reason == EventIncidentRecorded && ev.Type == corev1.EventTypeWarning && ev.Action == "RecordIncident" &&
		ev.Regarding.Name == "pb" && ev.Regarding.Kind == "PodBugger" && ev.Related != nil && ev.Related.Name == "web-1" &&
		ev.Related.ResourceVersion == "42" && ev.ReportingController == reportingController && !ev.EventTime.IsZero()
}
