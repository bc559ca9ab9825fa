package podbugger

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
)

// The incident recorder's Events wait in a bounded queue and are kept
// nowhere once written: client-go's broadcaster kept every one it sent for
// 6 to 12 minutes (none is ever alike: each names its pod at the version
// that failed), 28% of the crash-loop row's heap at its end. Beyond the
// queue an Event is dropped, never blocking the recorder; what is queued is
// the Event client-go's recorder would have written.
func TestIncidentEventsAreQueuedBoundedAndKeptNowhere(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), debugv1beta1.AddToScheme(scheme)); err != nil {
		t.Fatal(err)
	}
	e := newEventWriter(scheme, nil, ControllerName) // nothing writes: Start is not run
	e.now = func() time.Time { return time.Date(2026, 11, 26, 18, 0, 0, 0, time.UTC) }
	pb := &debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "pb", UID: types.UID("pb-uid")}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web-1", UID: types.UID("pod-uid"), ResourceVersion: "42"}}
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
	if len(e.queue) != maxQueuedEvents {
		t.Fatalf("%d Events queued, want the bound %d", len(e.queue), maxQueuedEvents)
	}
	ev := <-e.queue
	if ev.Note != "failure 0" || ev.Reason != EventIncidentRecorded || ev.Type != corev1.EventTypeWarning || ev.Action != "RecordIncident" ||
		ev.Regarding.Name != "pb" || ev.Regarding.Kind != "PodBugger" || ev.Related == nil || ev.Related.Name != "web-1" ||
		ev.Related.ResourceVersion != "42" || ev.Namespace != "team" || ev.ReportingController != ControllerName || ev.EventTime.IsZero() {
		t.Errorf("queued Event %+v", ev)
	}
}
