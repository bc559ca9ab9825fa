package jobwatcher

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
)

// ledger carries deletions from the Job controller to the status controller
// of one watcher kind. For each watcher it keeps how many Jobs this running
// controller (its instance) deleted; the status records, in the same write
// that adds them to deletedJobs, how many of them it counts
// (status.countedDeletions), so that the count is right from whatever status
// the apiserver held when it was computed, also when an earlier write's
// response was lost (see countDeleted). A deletion made just before the
// manager stops may go uncounted (its Event and metric still record it).
type ledger struct {
	// instance tells this controller's counts from an earlier one's.
	instance string
	// notify wakes the status controller of the kind.
	notify chan event.GenericEvent

	mu      sync.Mutex
	tallies map[types.UID]*tally
	// unsaved holds, by Job UID, the deletion waiting for the failure
	// record of that Job to be in its watcher's status (see save).
	unsaved map[types.UID]*pendingRecord
}

// pendingRecord is a deletion waiting for its failure record: done is
// closed once it is in the watcher's status (err nil) or will never be
// (err says why, and the Job must not be deleted on that watcher's say).
type pendingRecord struct {
	done chan struct{}
	err  error
}

// errWatcherGone releases the deletions of a watcher that is gone: nothing
// it had pending is deleted on its say.
var errWatcherGone = errors.New("the watcher is gone")

// tally is one watcher's deletions: how many, and the newest failure
// records (at most MaxFailureRecords) this controller saved or saw in its
// status, oldest first. They are kept after the status shows them, so that
// another writer's status (an older leader's late write, a user's edit)
// cannot lose them: every status computed from then on holds them again.
type tally struct {
	key      types.NamespacedName
	n        int64
	failures []deckhandbatchv1.FailureRecord
	// untold are the deletions no Event on the watcher has told yet.
	untold []deletedJob
	// breakers are the watcher's deletion circuit breakers: one for a
	// JobWatcher (""), one per namespace for a ClusterJobWatcher.
	breakers map[string]*breaker
}

// deletedJob is one deletion for the watcher's Events: the Job's namespace
// and name, and the note that tells it alone.
type deletedJob struct{ name, note string }

// GetName names the Job as namespace/name.
func (d deletedJob) GetName() string { return d.name }

// job is a reference to the deleted Job, for an Event's related object.
func (d deletedJob) job() *batchv1.Job {
	ns, name, _ := strings.Cut(d.name, "/")
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// deletions is how many Jobs a watcher had deleted when its status was
// computed, by the controller instance, and the failure records its status
// must hold.
type deletions struct {
	instance string
	n        int64
	failures []deckhandbatchv1.FailureRecord
}

func newLedger() *ledger {
	return &ledger{instance: string(uuid.NewUUID()), notify: make(chan event.GenericEvent, 1024), tallies: map[types.UID]*tally{},
		unsaved: map[types.UID]*pendingRecord{}}
}

// add counts one deletion by watcher, keeps it for the watcher's next
// Event, and wakes its status controller.
func (l *ledger) add(ctx context.Context, watcher client.Object, job deletedJob) {
	l.mu.Lock()
	t := l.tally(watcher)
	t.n++
	t.untold = append(t.untold, job)
	l.mu.Unlock()
	l.wake(ctx, watcher)
}

// save hands the failure record of a Job about to be deleted to the
// watcher's status controller and returns once the watcher's status holds
// it (or has pushed it out for newer ones): the record is written before
// the Job is deleted, so that a manager that stops right after the delete
// loses no record. A record whose Job then stays (it changed between the
// last read and the delete) is the price; the Job is judged again. It fails
// when the watcher goes before its status holds the record: the deletion
// was the gone watcher's to make, and is not made.
func (l *ledger) save(ctx context.Context, watcher client.Object, failure deckhandbatchv1.FailureRecord) error {
	l.mu.Lock()
	t := l.tally(watcher)
	pending, ok := l.unsaved[failure.UID]
	if !ok {
		pending = &pendingRecord{done: make(chan struct{})}
		l.unsaved[failure.UID] = pending
		l.keep(t, []deckhandbatchv1.FailureRecord{failure})
	}
	l.mu.Unlock()
	l.wake(ctx, watcher)
	ctx, cancel := context.WithTimeout(ctx, saveTimeout)
	defer cancel()
	select {
	case <-pending.done:
		if pending.err != nil {
			return fmt.Errorf("the failure record of Job %s/%s was not saved: %w", failure.Namespace, failure.Job, pending.err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the failure record of Job %s/%s is not in the status of %s yet: %w",
			failure.Namespace, failure.Job, client.ObjectKeyFromObject(watcher), ctx.Err())
	}
}

// saveTimeout bounds how long a deletion waits for its failure record to be
// written: the status controller writes at most once per StatusInterval.
const saveTimeout = 10 * StatusInterval

// saved tells the waiting deletions that their records are in a status
// the apiserver accepted: records is what the status controller wrote.
func (l *ledger) saved(records []deckhandbatchv1.FailureRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.settle(records)
}

// settle releases the deletions waiting for records: saved. The caller
// holds l.mu.
func (l *ledger) settle(records []deckhandbatchv1.FailureRecord) {
	l.release(records, nil)
}

// release ends the wait of the deletions waiting for records, with err
// (nil: saved). The caller holds l.mu.
func (l *ledger) release(records []deckhandbatchv1.FailureRecord, err error) {
	for _, f := range records {
		if p, ok := l.unsaved[f.UID]; ok {
			p.err = err
			close(p.done)
			delete(l.unsaved, f.UID)
		}
	}
}

// keep adds records to t's (one per Job UID), keeping the newest
// MaxFailureRecords by deletion time: the newest are the ones a status
// keeps, so a deletion waiting for an older one is released as saved. The
// caller holds l.mu.
func (l *ledger) keep(t *tally, records []deckhandbatchv1.FailureRecord) {
	for _, f := range records {
		if !slices.ContainsFunc(t.failures, sameJob(f)) {
			t.failures = append(t.failures, f)
		}
	}
	slices.SortStableFunc(t.failures, func(a, b deckhandbatchv1.FailureRecord) int {
		return a.DeletedAt.Compare(b.DeletedAt.Time)
	})
	if cut := len(t.failures) - deckhandbatchv1.MaxFailureRecords; cut > 0 {
		l.settle(t.failures[:cut])
		t.failures = slices.Delete(t.failures, 0, cut)
	}
}

// tally returns the watcher's tally, new if need be. The caller holds l.mu.
func (l *ledger) tally(watcher client.Object) *tally {
	t, ok := l.tallies[watcher.GetUID()]
	if !ok {
		t = &tally{key: client.ObjectKeyFromObject(watcher)}
		l.tallies[watcher.GetUID()] = t
	}
	return t
}

// wake queues the watcher for its status controller.
func (l *ledger) wake(ctx context.Context, watcher client.Object) {
	select {
	case l.notify <- event.GenericEvent{Object: watcher}:
	case <-ctx.Done():
	}
}

// count returns the deletions by the watcher so far, and the failure
// records its status must hold: the ones saved for it and the ones shown
// (the failure records of the status the cache holds), which it keeps
// from now on. A status shown is not necessarily this controller's: another
// writer may have replaced it with one that lacks records this controller
// saved or saw, and the next status puts them back. The tallies of an
// earlier watcher of the same name (another UID: deleted and created again
// before its status controller saw it gone, so forget never ran for it) go.
func (l *ledger) count(watcher client.Object, shown []deckhandbatchv1.FailureRecord) deletions {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forgetOthers(client.ObjectKeyFromObject(watcher), watcher.GetUID())
	t := l.tally(watcher)
	l.keep(t, shown)
	l.settle(shown)
	return deletions{instance: l.instance, n: t.n, failures: slices.Clone(t.failures)}
}

// tell returns the deletions by the watcher uid that no Event has told yet,
// and counts them told.
func (l *ledger) tell(uid types.UID) []deletedJob {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.tallies[uid]
	if !ok {
		return nil
	}
	untold := t.untold
	t.untold = nil
	return untold
}

// forget drops the tallies of the watcher key names, which is gone. The
// deletions waiting for a record of it are released with errWatcherGone:
// no status will hold their records, and the Jobs are not deleted on the
// say of a watcher that no longer exists (another watcher may still
// govern them, judged afresh).
func (l *ledger) forget(key types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	maps.DeleteFunc(l.tallies, func(_ types.UID, t *tally) bool {
		if t.key != key {
			return false
		}
		l.release(t.failures, errWatcherGone)
		return true
	})
}

// forgetOthers drops the tallies of the watchers named key other than uid,
// which are gone, as forget does. The caller holds l.mu.
func (l *ledger) forgetOthers(key types.NamespacedName, uid types.UID) {
	maps.DeleteFunc(l.tallies, func(u types.UID, t *tally) bool {
		if t.key != key || u == uid {
			return false
		}
		l.release(t.failures, errWatcherGone)
		return true
	})
}

// countDeleted returns deletedJobs and countedDeletions for a status
// computed from old: old's count plus the deletions of d that old does not
// count yet. old may be any status the apiserver held, even one behind a
// write whose response was lost: its count and mark always agree, so no
// deletion is counted twice or missed.
func countDeleted(old deckhandbatchv1.JobWatcherStatus, d deletions) (int64, string) {
	var counted int64
	if instance, n, ok := strings.Cut(old.CountedDeletions, "/"); ok && instance == d.instance {
		counted, _ = strconv.ParseInt(n, 10, 64)
	}
	if d.n <= counted {
		return old.DeletedJobs, old.CountedDeletions
	}
	return old.DeletedJobs + d.n - counted, fmt.Sprintf("%s/%d", d.instance, d.n)
}
