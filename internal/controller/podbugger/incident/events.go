package incident

import (
	"context"
	"fmt"
	"maps"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	typedeventsv1 "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/tools/reference"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Every other Event of Deckhand goes through client-go's events.k8s.io/v1
// broadcaster, which keeps each Event it sent for 6 to 12 minutes, to count
// a later one alike into a series. The Events of new records
// (IncidentRecorded) are never alike: each refers to its pod at the
// resourceVersion that failed, and its note names a new record. What the
// broadcaster kept of them was waste, growing with the rate of failures a
// tenant's pods make: at the end of the crash-loop row (1,000 crash-looping
// pods, three one-minute rounds) 7.7 MB of the manager's 21.8 MB of live
// heap, and up to twelve minutes' worth while pods loop (docs/dev-log/performance.md).
// The incident recorder's Events are therefore written by an eventWriter:
// each as a new Event, as the broadcaster wrote them, and nothing kept once
// written.
const (
	// maxQueuedEvents bounds the Events waiting to be written (as the
	// broadcaster's queue does, with the same number), and
	// maxQueuedEventsPerNamespace those of one namespace: beyond them an
	// Event is dropped, never the record it tells of, and the writers take
	// the namespaces in turn (fairQueue): a tenant's storm of failures
	// neither delays nor drops another tenant's Events.
	maxQueuedEvents             = 1000
	maxQueuedEventsPerNamespace = maxQueuedEvents / 4
	// eventWriters is how many Events are written at once, at most half
	// of them a namespace's.
	eventWriters = 4
	// eventAttempts is how often an Event the apiserver did not answer is
	// tried, eventRetry apart.
	eventAttempts = 5
	eventRetry    = 2 * time.Second
)

// eventWriter writes Events from a bounded queue; it is an
// events.EventRecorder, and its writers run as a manager Runnable.
type eventWriter struct {
	scheme     *runtime.Scheme
	sink       typedeventsv1.EventsV1Interface
	controller string
	instance   string
	queue      *fairQueue[*eventsv1.Event]
	now        func() time.Time
}

func newEventWriter(scheme *runtime.Scheme, sink typedeventsv1.EventsV1Interface, controller string) *eventWriter {
	host, _ := os.Hostname()
	return &eventWriter{scheme: scheme, sink: sink, controller: controller, instance: controller + "-" + host,
		queue: newFairQueue[*eventsv1.Event](maxQueuedEvents, maxQueuedEventsPerNamespace, eventWriters/2), now: time.Now}
}

// Eventf queues the Event; it never blocks.
func (e *eventWriter) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	e.AnnotatedEventf(regarding, related, nil, eventtype, reason, action, note, args...)
}

// AnnotatedEventf is Eventf with annotations on the Event.
func (e *eventWriter) AnnotatedEventf(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...any) {
	ev, err := e.event(regarding, related, eventtype, reason, action, fmt.Sprintf(note, args...))
	if err == nil && len(annotations) > 0 {
		ev.Annotations = maps.Clone(annotations)
	}
	if err != nil {
		logf.Log.WithName(reportingController).Error(err, "an Event not written", "reason", reason)
		return
	}
	if e.queue.push(ev.Namespace, ev) != refusedNone {
		dropped.WithLabelValues(droppedEvent).Inc()
		logf.Log.WithName(reportingController).Info("an Event dropped: too many were waiting to be written",
			"namespace", ev.Namespace, "reason", reason, "note", ev.Note)
	}
}

// event is the Event client-go's recorder would make.
func (e *eventWriter) event(regarding, related runtime.Object, eventtype, reason, action, note string) (*eventsv1.Event, error) {
	reg, err := reference.GetReference(e.scheme, regarding)
	if err != nil {
		return nil, err
	}
	var rel *corev1.ObjectReference
	if related != nil {
		if rel, err = reference.GetReference(e.scheme, related); err != nil {
			rel = nil
		}
	}
	now := e.now()
	ns := reg.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%v.%x", reg.Name, now.UnixNano()), Namespace: ns},
		EventTime:  metav1.NewMicroTime(now), ReportingController: e.controller, ReportingInstance: e.instance,
		Action: action, Reason: reason, Regarding: *reg, Related: rel, Note: note, Type: eventtype,
	}, nil
}

// NeedLeaderElection is false: the writers run on every replica, and only
// the leader's recorder gives them Events.
func (e *eventWriter) NeedLeaderElection() bool { return false }

// Start writes the queued Events until ctx ends (a manager Runnable).
func (e *eventWriter) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	for range eventWriters {
		wg.Go(func() {
			for {
				ev, ns, ok := e.queue.next(ctx)
				if !ok {
					return
				}
				e.write(ctx, ev)
				e.queue.finish(ns)
			}
		})
	}
	wg.Wait()
	return nil
}

// write creates ev, trying again while the apiserver does not answer.
func (e *eventWriter) write(ctx context.Context, ev *eventsv1.Event) {
	for attempt := 1; ; attempt++ {
		_, err := e.sink.Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			return
		}
		if answered(err) || attempt == eventAttempts {
			logf.FromContext(ctx).Error(err, "an Event not written", "reason", ev.Reason, "note", ev.Note)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(eventRetry):
		}
	}
}
