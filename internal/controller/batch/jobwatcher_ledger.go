package batch

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

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
	// unsaved holds, by Job UID, a channel closed once the failure record
	// of that Job is in its watcher's status (see save).
	unsaved map[types.UID]chan struct{}
}

// tally is one watcher's deletions: how many, and the failure records not
// yet seen in its status.
type tally struct {
	key      types.NamespacedName
	n        int64
	failures []deckhandbatchv1.FailureRecord
	// untold are the deletions no Event on the watcher has told yet.
	untold []deletedJob
}

// deletedJob is one deletion for the watcher's Events: the Job's namespace
// and name, and the note that tells it alone.
type deletedJob struct{ name, note string }

// GetName names the Job as namespace/name.
func (d deletedJob) GetName() string { return d.name }

// deletions is how many Jobs a watcher had deleted when its status was
// computed, by the controller instance, and the failure records its status
// does not show yet.
type deletions struct {
	instance string
	n        int64
	failures []deckhandbatchv1.FailureRecord
}

func newLedger() *ledger {
	return &ledger{instance: string(uuid.NewUUID()), notify: make(chan event.GenericEvent, 1024), tallies: map[types.UID]*tally{},
		unsaved: map[types.UID]chan struct{}{}}
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
// last read and the delete) is the price; the Job is judged again.
func (l *ledger) save(ctx context.Context, watcher client.Object, failure deckhandbatchv1.FailureRecord) error {
	l.mu.Lock()
	t := l.tally(watcher)
	saved, ok := l.unsaved[failure.UID]
	if !ok {
		saved = make(chan struct{})
		l.unsaved[failure.UID] = saved
		// The newest records are the ones a status keeps.
		t.failures = append(t.failures, failure)
		if cut := len(t.failures) - deckhandbatchv1.MaxFailureRecords; cut > 0 {
			l.settle(t.failures[:cut])
			t.failures = t.failures[cut:]
		}
	}
	l.mu.Unlock()
	l.wake(ctx, watcher)
	ctx, cancel := context.WithTimeout(ctx, saveTimeout)
	defer cancel()
	select {
	case <-saved:
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

// settle releases the deletions waiting for records. The caller holds l.mu.
func (l *ledger) settle(records []deckhandbatchv1.FailureRecord) {
	for _, f := range records {
		if ch, ok := l.unsaved[f.UID]; ok {
			close(ch)
			delete(l.unsaved, f.UID)
		}
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

// count returns the deletions by the watcher uid so far, and the failure
// records that shown (the failure records of the status the apiserver
// held) does not hold. The ones it holds are dropped: once the apiserver
// held them, every later status is computed from one that holds them.
func (l *ledger) count(uid types.UID, shown []deckhandbatchv1.FailureRecord) deletions {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := deletions{instance: l.instance}
	if t, ok := l.tallies[uid]; ok {
		t.failures = slices.DeleteFunc(t.failures, func(f deckhandbatchv1.FailureRecord) bool {
			return slices.ContainsFunc(shown, sameJob(f))
		})
		l.settle(shown)
		d.n, d.failures = t.n, slices.Clone(t.failures)
	}
	return d
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

// forget drops the tallies of the watcher key names, which is gone.
func (l *ledger) forget(key types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	maps.DeleteFunc(l.tallies, func(_ types.UID, t *tally) bool {
		if t.key != key {
			return false
		}
		l.settle(t.failures) // no status will hold them: do not keep their Jobs waiting
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
