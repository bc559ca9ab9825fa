// Package status is how every Deckhand controller writes the status of the
// objects it reconciles, and sets their conditions.
//
// A controller computes the whole status with a pure function and hands it
// to a Writer, which writes it only when it differs from what the apiserver
// holds. The write replaces the status as a whole (a JSON patch that sets
// /status), so no field of an older status can survive it, whatever the
// cache showed when the status was computed; and it carries no
// resourceVersion, so it never fails with a conflict.
//
// The controller is not the only possible writer: a previous leader's write
// can land late, and a user can edit the status (kubectl edit
// --subresource=status). The Writer tells the two cases a cached copy can be
// in apart: the cache has not caught up with its own last write yet, or
// someone else wrote since. resourceVersions are opaque, so it compares them
// only for equality with the one its own write produced; when the cache shows
// a status that is not the one it wrote at a resourceVersion it did not
// produce, it asks the apiserver. Either way the computed status ends up on
// the apiserver: a controller wakes for another writer's status through
// WrittenByOthers.
package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// Writer writes the status (of type S) of one kind of object. It remembers,
// per object, the last status it wrote and the resourceVersion that write
// produced, so that a cached copy that has not caught up with that write is
// never taken for what the apiserver holds, and a status someone else wrote
// since is never taken for its own.
type Writer[S any] struct {
	client client.StatusClient

	mu      sync.Mutex
	written map[types.NamespacedName]record[S]
	// sending is, per object, the status of a write under way.
	sending map[types.NamespacedName]S

	// kind and conditions are set by ConditionMetrics; shown is, per
	// object, the reason of each condition type the gauge shows.
	kind       string
	conditions func(*S) []metav1.Condition
	shown      map[types.NamespacedName]map[string]string

	// pace is set by Paced.
	pace *pacing[S]
}

// record is the last status a Writer wrote for one object.
type record[S any] struct {
	uid             types.UID
	resourceVersion string
	// earlier are the resourceVersions this Writer's earlier writes of the
	// object produced, the latest last (at most keptVersions): a cache
	// behind the apiserver delivers them late, and they are neither
	// another writer's status nor what the apiserver holds.
	earlier []string
	status  S
	// at is when a Paced Writer wrote it (zero for one not paced).
	at time.Time
}

// NewWriter returns a Writer that writes through c's status subresource.
func NewWriter[S any](c client.StatusClient, opts ...Option[S]) *Writer[S] {
	w := &Writer[S]{client: c, written: map[types.NamespacedName]record[S]{}, sending: map[types.NamespacedName]S{}, shown: map[types.NamespacedName]map[string]string{}}
	for _, o := range opts {
		o(w)
	}
	return w
}

// Write makes the status of obj on the apiserver equal to want. obj is the
// copy the controller read (usually from the cache) and current points at
// its status field. When the apiserver already holds want, Write sends
// nothing; otherwise it sends one request and, on success, obj and *current
// reflect what the apiserver now holds. An object deleted meanwhile is no
// error. With ConditionMetrics, the conditions the apiserver then holds are
// shown in the deckhand_status_condition gauge.
//
// A Writer built with Paced may hold a change back instead: then it sends
// nothing and returns how long is left until the change is due, for the
// caller to look again then with what is current then. Otherwise the
// duration is zero.
func (w *Writer[S]) Write(ctx context.Context, obj client.Object, current *S, want S) (time.Duration, error) {
	key := client.ObjectKeyFromObject(obj)
	held, err := w.confirmedHeld(ctx, obj, *current, want)
	if err != nil {
		return 0, err
	}
	if equality.Semantic.DeepEqual(held, want) {
		w.showConditions(key, &want)
		return 0, nil
	}
	var now time.Time
	if w.pace != nil {
		now = w.pace.now()
		if last := w.lastWritten(obj); !last.IsZero() && !w.pace.urgent(obj, &held, &want) {
			if wait := last.Add(w.pace.interval).Sub(now); wait > 0 {
				return wait, nil
			}
		}
	}
	return 0, w.write(ctx, key, obj, current, want, now)
}

// pacing is how a Paced Writer spaces its writes of one object's status.
type pacing[S any] struct {
	interval time.Duration
	now      func() time.Time
	urgent   func(obj client.Object, held, want *S) bool
}

// Paced makes a Writer pace the writes of a status that changes with nearly
// every event of a burst, as a PodSet's counts do while a thousand pods
// start: each write costs the apiserver a patch and every watcher a copy of
// the whole object. A change is written at once when it is the first, when
// urgent says so (obj is the object being written, held what the apiserver
// holds), or when interval has passed since the Writer last wrote the
// object's status by now, the caller's clock; otherwise Write holds it back.
func Paced[S any](interval time.Duration, now func() time.Time, urgent func(obj client.Object, held, want *S) bool) Option[S] {
	return func(w *Writer[S]) {
		w.pace = &pacing[S]{interval: interval, now: now, urgent: urgent}
	}
}

// lastWritten is when a Paced Writer last wrote obj's status, zero if never.
func (w *Writer[S]) lastWritten(obj client.Object) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	rec, ok := w.written[client.ObjectKeyFromObject(obj)]
	if !ok || rec.uid != obj.GetUID() {
		return time.Time{}
	}
	return rec.at
}

// write sends want as obj's status and remembers it, written at at.
func (w *Writer[S]) write(ctx context.Context, key types.NamespacedName, obj client.Object, current *S, want S, at time.Time) error {
	body, err := json.Marshal([]jsonPatchOp{{Op: "add", Path: "/status", Value: want}})
	if err != nil {
		return fmt.Errorf("encoding status: %w", err)
	}
	w.mu.Lock()
	w.sending[key] = want
	w.mu.Unlock()
	err = w.client.Status().Patch(ctx, obj, client.RawPatch(types.JSONPatchType, body))
	w.mu.Lock()
	delete(w.sending, key)
	w.mu.Unlock()
	if err != nil {
		if apierrors.IsNotFound(err) {
			w.Forget(key)
			return nil
		}
		return fmt.Errorf("patching the status: %w", err)
	}
	// obj, and with it *current, now holds what the apiserver answered.
	w.mu.Lock()
	var earlier []string
	if prev, ok := w.written[key]; ok && prev.uid == obj.GetUID() {
		earlier = append(prev.earlier, prev.resourceVersion)
		earlier = earlier[max(0, len(earlier)-keptVersions):]
	}
	w.written[key] = record[S]{uid: obj.GetUID(), resourceVersion: obj.GetResourceVersion(), earlier: earlier, status: *current, at: at}
	w.mu.Unlock()
	w.showConditions(key, current)
	return nil
}

// held is the status the apiserver holds for obj, as far as this process
// knows without asking: the cached copy's, unless this Writer wrote another
// one that the copy does not show at a resourceVersion other than the one
// the write produced, in which case the written one. It is also whether
// that is a guess: such a copy is either older than the write (the cache
// has not caught up) or newer (someone else wrote since), and opaque
// resourceVersions cannot tell which.
func (w *Writer[S]) held(obj client.Object, cached S) (S, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	rec, ok := w.written[client.ObjectKeyFromObject(obj)]
	if !ok || rec.uid != obj.GetUID() || rec.resourceVersion == obj.GetResourceVersion() ||
		equality.Semantic.DeepEqual(rec.status, cached) {
		return cached, false
	}
	if slices.Contains(rec.earlier, obj.GetResourceVersion()) {
		// One of this Writer's earlier writes: the cache is behind the
		// last one, for sure. A write by someone else since would come
		// through the watch and wake the controller (WrittenByOthers).
		return rec.status, false
	}
	return rec.status, true
}

// keptVersions is how many of its earlier writes' resourceVersions a Writer
// remembers per object: more than a cache behind by a second shows late.
const keptVersions = 16

// confirmedHeld is held, asked of the apiserver when the guess decides
// whether to write: when it says the apiserver holds want already. A guess
// that it holds something else costs nothing to be wrong about: want is
// written (or, paced, looked at again) either way.
func (w *Writer[S]) confirmedHeld(ctx context.Context, obj client.Object, cached, want S) (S, error) {
	held, guess := w.held(obj, cached)
	if !guess || !equality.Semantic.DeepEqual(held, want) {
		return held, nil
	}
	live, err := w.live(ctx, obj)
	switch {
	case errors.Is(err, errNoLiveReads):
		return held, nil
	case apierrors.IsNotFound(err):
		// Gone: the write would find it gone too.
		w.Forget(client.ObjectKeyFromObject(obj))
		return want, nil
	case err != nil:
		return held, fmt.Errorf("reading status past the cache: %w", err)
	}
	return *live, nil
}

// errNoLiveReads: the Writer's client cannot read the status subresource.
var errNoLiveReads = errors.New("the status client cannot read past the cache")

// live reads obj's status from the apiserver (GET on its status
// subresource, which no cache answers).
func (w *Writer[S]) live(ctx context.Context, obj client.Object) (*S, error) {
	sc, ok := w.client.(client.SubResourceClientConstructor)
	if !ok {
		return nil, errNoLiveReads
	}
	fresh, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return nil, errNoLiveReads
	}
	if err := sc.SubResource("status").Get(ctx, obj, fresh); err != nil {
		return nil, err
	}
	st, ok := statusOf[S](fresh)
	if !ok {
		return nil, errNoLiveReads
	}
	return st, nil
}

// statusOf is the Status field of obj, a pointer to a struct, when it is
// of type S.
func statusOf[S any](obj client.Object) (*S, bool) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil, false
	}
	f := v.Elem().FieldByName("Status")
	if !f.IsValid() || !f.CanAddr() {
		return nil, false
	}
	st, ok := f.Addr().Interface().(*S)
	return st, ok
}

// WrittenByOthers is a predicate for the controller's watch of its own kind
// that passes the updates in which another writer changed the status: an
// older leader's late write, a user's edit. A controller that is not woken
// by status changes (they are its own writes, mostly) needs it, or another
// writer's status stays on a quiet object. It passes an update whose status
// changed to one that this Writer neither last wrote nor is writing.
func (w *Writer[S]) WrittenByOthers() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			if e.ObjectOld == nil || e.ObjectNew == nil {
				return false
			}
			old, ok1 := statusOf[S](e.ObjectOld)
			now, ok2 := statusOf[S](e.ObjectNew)
			if !ok1 || !ok2 || equality.Semantic.DeepEqual(old, now) {
				return false
			}
			key := client.ObjectKeyFromObject(e.ObjectNew)
			w.mu.Lock()
			defer w.mu.Unlock()
			if rec, ok := w.written[key]; ok && rec.uid == e.ObjectNew.GetUID() &&
				(rec.resourceVersion == e.ObjectNew.GetResourceVersion() || equality.Semantic.DeepEqual(&rec.status, now) ||
					slices.Contains(rec.earlier, e.ObjectNew.GetResourceVersion())) {
				// Its own write, the last or an earlier one a lagging
				// cache delivers late: waking for it would compute a
				// status from that stale copy and write again, and again
				// at each late delivery (a PodSet on a cache 500 ms behind
				// wrote its status 139 times in a minute).
				return false
			}
			if sending, ok := w.sending[key]; ok && equality.Semantic.DeepEqual(&sending, now) {
				return false
			}
			return true
		},
	}
}

// Forget drops what the Writer remembers of the object key names, and its
// condition series: call it when the object is gone.
func (w *Writer[S]) Forget(key types.NamespacedName) {
	w.mu.Lock()
	delete(w.written, key)
	w.forgetConditions(key)
	w.mu.Unlock()
}

// jsonPatchOp is one operation of an RFC 6902 JSON patch. "add" on an
// existing member replaces it, and creates it when it is missing.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// ConditionsChanged says whether two sets of conditions differ in what a
// user or an alert acts on: a condition's type, status or reason. Messages,
// which often only count, and times do not count.
func ConditionsChanged(a, b []metav1.Condition) bool {
	return !slices.EqualFunc(a, b, func(x, y metav1.Condition) bool {
		return x.Type == y.Type && x.Status == y.Status && x.Reason == y.Reason
	})
}

// SetCondition sets c in conds, replacing the condition of the same type.
// The transition time is now when the condition is new or its status
// changed, and kept otherwise; c's own LastTransitionTime is ignored. Unlike
// meta.SetStatusCondition it never reads the clock, and it keeps whole
// seconds, as the apiserver stores them, so that a computed status compares
// equal to the stored one. A message longer than MaxMessage is cut (Message).
func SetCondition(conds *[]metav1.Condition, c metav1.Condition, now metav1.Time) {
	c.LastTransitionTime = now.Rfc3339Copy()
	c.Message = Message(c.Message)
	for i := range *conds {
		if old := &(*conds)[i]; old.Type == c.Type {
			if old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			}
			*old = c
			return
		}
	}
	*conds = append(*conds, c)
}
