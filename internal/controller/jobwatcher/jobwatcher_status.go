package jobwatcher

import (
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	"github.com/deckhand-dev/deckhand/internal/status"
)

// summary is what one watcher governs among the Jobs it reaches. Expired
// counts the pending Jobs past their expiry that an active watcher should
// have deleted already: more than a moment's worth means deletions fail.
type summary struct {
	Matched, Pending, Expired int32
	Next                      *time.Time
	WouldDelete               []string
	// Breaker is the watcher's deletion circuit breaker.
	Breaker breakerState
}

// summarize judges every Job with every policy and counts, for self, the
// Jobs it matches and the finished ones it governs: waiting for their TTL (or
// for self to resume) are pending; expired ones in dry run would be deleted.
// An expired Job of an active watcher counts as pending until it is gone.
func summarize(self *compiledWatcher, watchers []*compiledWatcher, jobs []batchv1.Job, now time.Time) summary {
	s, _ := summarizeFrom(self, watchers, jobsOf(jobs), now) // a list hands out no error
	return s
}

// summarizeFrom is summarize over the Jobs jobs hands out: twice when a
// watcher has history limits (they rank a group's Jobs before any is
// judged), else once.
func summarizeFrom(self *compiledWatcher, watchers []*compiledWatcher, jobs jobSource, now time.Time) (summary, error) {
	h, err := historyFrom(watchers, jobs)
	if err != nil {
		return summary{}, err
	}
	var s summary
	uid := self.watcher.GetUID()
	err = jobs(func(job *batchv1.Job) error {
		if !job.DeletionTimestamp.IsZero() || !self.matches(job) {
			return nil
		}
		s.Matched++
		d := decide(job, watchers, h)
		if d.Verdict != verdictExpires || d.Governor.watcher.GetUID() != uid {
			return nil
		}
		if d.due(now) && self.spec.DryRun && !self.spec.Suspend {
			s.WouldDelete = append(s.WouldDelete, job.Namespace+"/"+job.Name)
			return nil
		}
		s.Pending++
		if d.due(now) && !self.spec.Suspend {
			s.Expired++
		}
		if d.Expiry.After(now) && (s.Next == nil || d.Expiry.Before(*s.Next)) {
			s.Next = &d.Expiry
		}
		return nil
	})
	if err != nil {
		return summary{}, err
	}
	slices.Sort(s.WouldDelete)
	if len(s.WouldDelete) > deckhandbatchv1.MaxWouldDelete {
		s.WouldDelete = s.WouldDelete[:deckhandbatchv1.MaxWouldDelete]
	}
	return s, nil
}

// computeStatus is the watcher's status from old, what summarize found and
// the deletions the running controller made. The run times are start and end
// when anything else changed, else old's.
func computeStatus(old deckhandbatchv1.JobWatcherStatus, self *compiledWatcher, s summary, deleted deletions, start, end time.Time) deckhandbatchv1.JobWatcherStatus {
	st := *old.DeepCopy()
	st.ObservedGeneration = self.watcher.GetGeneration()
	st.MatchedJobs, st.PendingDeletions = s.Matched, s.Pending
	st.DeletedJobs, st.CountedDeletions = countDeleted(old, deleted)
	st.RecentFailures = mergeFailures(old.RecentFailures, deleted.failures, self.failureRecords())
	st.NextDeletionTime = nil
	if s.Next != nil {
		st.NextDeletionTime = &metav1.Time{Time: s.Next.Truncate(time.Second)}
	}
	st.WouldDelete = s.WouldDelete
	st.ResumeDeletions = resumeToken(self.watcher)
	st.DeletionWindows, st.PausedNamespaces = s.Breaker.windows, s.Breaker.pausedNamespaces

	status.SetHealth(&st.Conditions, st.ObservedGeneration, health(self, s), metav1.NewTime(start))
	setPaused(&st, s.Breaker, metav1.NewTime(start))
	if !equalButRunTimes(&old, &st) {
		st.LastRunStartTime, st.LastRunEndTime = ptrTime(start), ptrTime(end)
	}
	return st
}

func ptrTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t).Rfc3339Copy()
	return &mt
}

// equalButRunTimes compares two statuses but for the run times.
func equalButRunTimes(a, b *deckhandbatchv1.JobWatcherStatus) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	a.LastRunStartTime, a.LastRunEndTime = nil, nil
	b.LastRunStartTime, b.LastRunEndTime = nil, nil
	return equality.Semantic.DeepEqual(a, b)
}

// setPaused sets the DeletionsPaused condition: True while the breaker is
// tripped; False, once it was True, when it is not. A watcher whose breaker
// never tripped has none.
func setPaused(st *deckhandbatchv1.JobWatcherStatus, b breakerState, now metav1.Time) {
	paused := metav1.Condition{Type: deckhandbatchv1.ConditionDeletionsPaused, ObservedGeneration: st.ObservedGeneration}
	switch {
	case b.tripped:
		paused.Status, paused.Reason, paused.Message = metav1.ConditionTrue, deckhandbatchv1.ReasonTooManyDeletions, b.message
	case meta.FindStatusCondition(st.Conditions, deckhandbatchv1.ConditionDeletionsPaused) == nil:
		return
	case b.acknowledged:
		paused.Status, paused.Reason, paused.Message = metav1.ConditionFalse, deckhandbatchv1.ReasonAcknowledged,
			"resumed by the owner: the burst of deletions in progress goes through"
	default:
		paused.Status, paused.Reason, paused.Message = metav1.ConditionFalse, deckhandbatchv1.ReasonWithinLimit,
			"the deletions are within spec.maxDeletionsPerMinute"
	}
	status.SetCondition(&st.Conditions, paused, now)
}
