package batch

import (
	"context"
	"slices"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
)

// summary is what one watcher governs among the Jobs it reaches.
type summary struct {
	Matched, Pending int32
	Next             *time.Time
	WouldDelete      []string
}

// summarize judges every Job with every policy and counts, for self, the
// Jobs it matches and the finished ones it governs: waiting for their TTL (or
// for self to resume) are pending; expired ones in dry run would be deleted.
// An expired Job of an active watcher counts as pending until it is gone.
func summarize(self *policy, policies []*policy, jobs []batchv1.Job, now time.Time) summary {
	var s summary
	uid := self.watcher.GetUID()
	for i := range jobs {
		job := &jobs[i]
		if !job.DeletionTimestamp.IsZero() || !self.matches(job) {
			continue
		}
		s.Matched++
		d := decide(job, policies)
		if d.Verdict != verdictExpires || d.Governor.watcher.GetUID() != uid {
			continue
		}
		if d.due(now) && self.spec.DryRun && !self.spec.Suspend {
			s.WouldDelete = append(s.WouldDelete, job.Namespace+"/"+job.Name)
			continue
		}
		s.Pending++
		if d.Expiry.After(now) && (s.Next == nil || d.Expiry.Before(*s.Next)) {
			s.Next = &d.Expiry
		}
	}
	slices.Sort(s.WouldDelete)
	if len(s.WouldDelete) > deckhandbatchv1.MaxWouldDelete {
		s.WouldDelete = s.WouldDelete[:deckhandbatchv1.MaxWouldDelete]
	}
	return s
}

// computeStatus is the watcher's status from old, what summarize found and
// the deletions not yet counted in old. The run times are left as in old:
// the caller stamps them when anything else changed.
func computeStatus(old *deckhandbatchv1.JobWatcherStatus, self *policy, s summary, deleted int64) deckhandbatchv1.JobWatcherStatus {
	st := *old.DeepCopy()
	st.ObservedGeneration = self.watcher.GetGeneration()
	st.MatchedJobs, st.PendingDeletions = s.Matched, s.Pending
	st.DeletedJobs += deleted
	st.NextDeletionTime = nil
	if s.Next != nil {
		st.NextDeletionTime = &metav1.Time{Time: s.Next.Truncate(time.Second)}
	}
	st.WouldDelete = s.WouldDelete

	ready := metav1.Condition{Type: deckhandbatchv1.ConditionReady, Status: metav1.ConditionTrue,
		ObservedGeneration: st.ObservedGeneration}
	switch {
	case self.err != nil:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, deckhandbatchv1.ReasonInvalidSpec, self.err.Error()+"; the watcher matches no Job"
	case self.spec.Suspend:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, deckhandbatchv1.ReasonSuspended, "suspended: the Jobs this watcher governs are kept until it resumes"
	case self.spec.DryRun:
		ready.Reason, ready.Message = deckhandbatchv1.ReasonDryRun, "dry run: expired Jobs are listed in status.wouldDelete, none is deleted"
	default:
		ready.Reason, ready.Message = deckhandbatchv1.ReasonActive, "deleting the finished Jobs this watcher governs when they expire"
	}
	meta.SetStatusCondition(&st.Conditions, ready)
	return st
}

// statusChanged compares two statuses but for the run times.
func statusChanged(a, b *deckhandbatchv1.JobWatcherStatus) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	a.LastRunStartTime, a.LastRunEndTime = nil, nil
	b.LastRunStartTime, b.LastRunEndTime = nil, nil
	return !equality.Semantic.DeepEqual(a, b)
}

// ledger carries deletions from the Job controller to the status
// controllers, which add them to status.deletedJobs. It is in memory: a
// deletion made just before the manager stops may go uncounted (the Event
// and the metric still record it).
type ledger struct {
	mu     sync.Mutex
	counts map[types.UID]int64
	// notify has one channel per watcher kind, feeding its status controller.
	notify map[bool]chan event.GenericEvent
}

func newLedger() *ledger {
	return &ledger{
		counts: map[types.UID]int64{},
		notify: map[bool]chan event.GenericEvent{false: make(chan event.GenericEvent, 1024), true: make(chan event.GenericEvent, 1024)},
	}
}

// add counts one deletion by watcher and wakes its status controller.
func (l *ledger) add(ctx context.Context, watcher client.Object) {
	l.mu.Lock()
	l.counts[watcher.GetUID()]++
	l.mu.Unlock()
	_, cluster := watcher.(*deckhandbatchv1.ClusterJobWatcher)
	select {
	case l.notify[cluster] <- event.GenericEvent{Object: watcher}:
	case <-ctx.Done():
	}
}

// pending returns the deletions by uid not yet in its status.
func (l *ledger) pending(uid types.UID) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts[uid]
}

// ack records that n deletions reached the status of uid.
func (l *ledger) ack(uid types.UID, n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.counts[uid] -= n; l.counts[uid] <= 0 {
		delete(l.counts, uid)
	}
}
