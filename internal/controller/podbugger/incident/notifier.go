package incident

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/notify"
)

// Event reasons of the notifier.
const (
	// EventNotificationSinkUnknown: a PodBugger names a sink the manager
	// does not have, or one its namespace may not use.
	EventNotificationSinkUnknown = "NotificationSinkUnknown"
	// EventNotificationUndelivered: a sink did not take a notification
	// within the Outbox's hour of retries (or the namespace had too many
	// waiting).
	EventNotificationUndelivered = "NotificationUndelivered"
)

// IncidentNotifier tells the sinks a PodBugger names (spec.incidents.notify)
// of its records: one notification when a record opens, and a summary when
// it closes (backoffWindow without another failure it would count). What a
// record still owes is on the record (debugv1beta1.NotificationAnnotation,
// set by the recorder when it opens one), so a notification is delivered at
// least once across restarts and failovers; its key (the record's UID and
// the notification) lets a receiver drop a repeat. It is keyed by record.
//
// Delivery is the Outbox's: retried with backoff for an hour, each
// namespace's notifications in order and one at a time, the namespaces
// served in turn, so that one tenant's storm or slow receiver does not
// delay another's. The outcome comes back as an event of the record, and
// only then does the annotation move on.
type IncidentNotifier struct {
	client.Client
	Recorder events.EventRecorder
	Now      func() time.Time
	Sinks    notify.Sinks
	Outbox   *notify.Outbox

	mu sync.Mutex
	// sending is, per record, the notification handed to the Outbox and
	// not yet settled.
	sending map[types.NamespacedName]*delivery
	// settled brings each record whose notification settled back to
	// Reconcile.
	settled chan event.TypedGenericEvent[*debugv1beta1.PodIncident]
}

// delivery is one notification of one record, to each of its sinks.
type delivery struct {
	uid  types.UID
	owed string
	// left is how many sinks have not settled; unsent names those that
	// did not take it.
	left   int
	unsent []string
	// advanced: the record was moved on to the next notification.
	advanced bool
}

// NewIncidentNotifier returns a notifier delivering through o to sinks.
func NewIncidentNotifier(c client.Client, recorder events.EventRecorder, sinks notify.Sinks, o *notify.Outbox) *IncidentNotifier {
	return &IncidentNotifier{Client: c, Recorder: recorder, Now: time.Now, Sinks: sinks, Outbox: o,
		sending: map[types.NamespacedName]*delivery{},
		settled: make(chan event.TypedGenericEvent[*debugv1beta1.PodIncident], 64)}
}

// Reconcile hands the notification record req owes to the Outbox, or, once
// it settled, moves the record on to the next one.
func (n *IncidentNotifier) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	inc := &debugv1beta1.PodIncident{}
	if err := n.Get(ctx, req.NamespacedName, inc); err != nil {
		if apierrors.IsNotFound(err) {
			n.drop(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	owed := inc.Annotations[debugv1beta1.NotificationAnnotation]
	d, ok := n.delivery(req.NamespacedName, inc.UID, owed)
	switch {
	case !ok:
	case d.left > 0 || d.advanced:
		// Being sent; or settled and the record moved on, which the cache
		// does not show yet.
		return reconcile.Result{}, nil
	default:
		return reconcile.Result{}, n.settle(ctx, inc, d)
	}
	if owed == "" {
		return reconcile.Result{}, nil
	}
	pb := &debugv1beta1.PodBugger{}
	switch err := n.Get(ctx, types.NamespacedName{Namespace: inc.Namespace, Name: inc.Spec.PodBugger}, pb); {
	case apierrors.IsNotFound(err) || (err == nil && pb.UID != types.UID(inc.Labels[debugv1beta1.IncidentPodBuggerUIDLabel])):
		return reconcile.Result{}, n.owe(ctx, inc, "") // its PodBugger is gone; the record goes with it
	case err != nil:
		return reconcile.Result{}, err
	}
	if owed != debugv1beta1.NotificationOpened && owed != debugv1beta1.NotificationClosed {
		return reconcile.Result{}, n.owe(ctx, inc, "")
	}
	if owed == debugv1beta1.NotificationClosed {
		if wait := inc.Spec.LastTime.Add(backoffWindow).Sub(n.Now()); wait > 0 {
			return reconcile.Result{RequeueAfter: wait + time.Second}, nil
		}
	}
	var targets []notify.Target
	var unknown []error
	for _, name := range notifySinks(pb) {
		t, err := n.Sinks.For(inc.Namespace, name)
		if err != nil {
			unknown = append(unknown, err)
			continue
		}
		targets = append(targets, t)
	}
	if len(unknown) > 0 {
		n.Recorder.Eventf(pb, inc, corev1.EventTypeWarning, EventNotificationSinkUnknown, "Notify",
			"spec.incidents.notify: %v; the platform team sets the manager's sinks (--incident-sinks-file)", errors.Join(unknown...))
	}
	if len(targets) == 0 {
		return reconcile.Result{}, n.owe(ctx, inc, next(owed))
	}
	n.send(inc, owed, targets)
	return reconcile.Result{}, nil
}

// settle moves inc on from the notification d delivered (or gave up on,
// which an Event on the PodBugger tells).
func (n *IncidentNotifier) settle(ctx context.Context, inc *debugv1beta1.PodIncident, d delivery) error {
	if len(d.unsent) > 0 {
		pb := &debugv1beta1.PodBugger{}
		if err := n.Get(ctx, types.NamespacedName{Namespace: inc.Namespace, Name: inc.Spec.PodBugger}, pb); err == nil {
			n.Recorder.Eventf(pb, inc, corev1.EventTypeWarning, EventNotificationUndelivered, "Notify",
				"the %s notification of PodIncident %s was not delivered to %v", d.owed, inc.Name, d.unsent)
		}
	}
	if err := n.owe(ctx, inc, next(d.owed)); err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if x := n.sending[client.ObjectKeyFromObject(inc)]; x != nil && x.uid == inc.UID {
		x.advanced = true
	}
	return nil
}

func notifySinks(pb *debugv1beta1.PodBugger) []string {
	if pb.Spec.Incidents == nil {
		return nil
	}
	return pb.Spec.Incidents.Notify
}

// next is the notification owed after owed: the summary after the opening,
// then none.
func next(owed string) string {
	if owed == debugv1beta1.NotificationOpened {
		return debugv1beta1.NotificationClosed
	}
	return ""
}

// owe writes what inc owes next (nothing when empty) on the record, if it
// is still the record of inc's UID.
func (n *IncidentNotifier) owe(ctx context.Context, inc *debugv1beta1.PodIncident, owed string) error {
	var value any
	if owed != "" {
		value = owed
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid": inc.UID, "annotations": map[string]any{debugv1beta1.NotificationAnnotation: value}}})
	if err != nil {
		return err
	}
	err = n.Patch(ctx, inc, client.RawPatch(types.MergePatchType, patch))
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("writing the notification PodIncident %s owes: %w", inc.Name, err)
	}
	return nil
}

// send hands inc's owed notification to the Outbox, once to each target.
func (n *IncidentNotifier) send(inc *debugv1beta1.PodIncident, owed string, targets []notify.Target) {
	key := types.NamespacedName{Namespace: inc.Namespace, Name: inc.Name}
	d := &delivery{uid: inc.UID, owed: owed, left: len(targets)}
	n.mu.Lock()
	n.sending[key] = d
	n.mu.Unlock()
	m := messageOf(inc, owed)
	for _, t := range targets {
		n.Outbox.Enqueue(inc.Namespace, t, m, func(delivered bool) {
			notifications.WithLabelValues(outcome(delivered)).Inc()
			n.mu.Lock()
			d.left--
			if !delivered {
				d.unsent = append(d.unsent, t.Name)
			}
			left := d.left
			n.mu.Unlock()
			if left == 0 {
				settled := &debugv1beta1.PodIncident{}
				settled.Namespace, settled.Name = key.Namespace, key.Name
				// Not from the Outbox's goroutine, which must not block.
				go func() { n.settled <- event.TypedGenericEvent[*debugv1beta1.PodIncident]{Object: settled} }()
			}
		})
	}
}

func outcome(delivered bool) string {
	if delivered {
		return "delivered"
	}
	return "undelivered"
}

// delivery returns a copy of the notification of record key (uid) handed
// to the Outbox, if it is owed's; ok false when there is none. One of
// another notification, or of an earlier record of the name, is dropped:
// the record moved on.
func (n *IncidentNotifier) delivery(key types.NamespacedName, uid types.UID, owed string) (delivery, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	d, ok := n.sending[key]
	switch {
	case !ok:
		return delivery{}, false
	case d.uid == uid && d.owed == owed:
		return *d, true
	case d.left == 0:
		delete(n.sending, key)
	}
	return delivery{}, false
}

// drop forgets record key's delivery, unless it is being sent.
func (n *IncidentNotifier) drop(key types.NamespacedName) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if d, ok := n.sending[key]; ok && d.left == 0 {
		delete(n.sending, key)
	}
}

// messageOf is the notification owed of inc.
func messageOf(inc *debugv1beta1.PodIncident, owed string) notify.Message {
	s := inc.Spec
	m := notify.Message{Key: string(inc.UID) + "/" + owed, Type: owed, Namespace: inc.Namespace, Source: s.PodBugger,
		Pod: s.Pod.Name, Container: s.Container, Reason: string(s.Reason), Record: inc.Name, Count: s.Count,
		FirstTime: s.FirstTime.Time, LastTime: s.LastTime.Time}
	if f := s.LastFailure; f != nil {
		m.ExitCode, m.Summary = f.ExitCode, cut(f.Message, 256)
	}
	return m
}

// SetupWithManager registers the notifier and its Outbox (both run on the
// leader only).
func (n *IncidentNotifier) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		n.Outbox.Run(ctx)
		return nil
	})); err != nil {
		return err
	}
	owes := func(o client.Object) bool { return o.GetAnnotations()[debugv1beta1.NotificationAnnotation] != "" }
	// A record owing nothing is of no interest, unless it stopped owing
	// (what was known of its delivery is dropped) or went.
	interesting := predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return owes(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return owes(e.ObjectOld) || owes(e.ObjectNew) },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return true },
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("podincident-notifier").
		For(&debugv1beta1.PodIncident{}, builder.WithPredicates(interesting)).
		WatchesRawSource(source.Channel(n.settled, &handler.TypedEnqueueRequestForObject[*debugv1beta1.PodIncident]{})).
		Complete(n)
}
