package jobwatcher

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
)

func TestComputeStatus(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	end := start.Add(time.Second)
	earlier := metav1.NewTime(start.Add(-time.Hour))
	next := start.Add(90*time.Second + 500*time.Millisecond)
	active := jw("ns", "w", ptr.To[int32](60), nil)
	active.watcher.SetGeneration(3)
	ready := func(st metav1.ConditionStatus, reason, msg string, at metav1.Time) []metav1.Condition {
		return []metav1.Condition{{Type: deckhandbatchv1.ConditionReady, Status: st, Reason: reason, Message: msg,
			ObservedGeneration: 3, LastTransitionTime: at}}
	}
	activeReady := ready(metav1.ConditionTrue, deckhandbatchv1.ReasonActive, "deleting the finished Jobs this watcher governs when they expire", metav1.NewTime(start))
	settled := deckhandbatchv1.JobWatcherStatus{MatchedJobs: 2, PendingDeletions: 1, ObservedGeneration: 3,
		NextDeletionTime: ptr.To(metav1.NewTime(next.Truncate(time.Second))),
		LastRunStartTime: &earlier, LastRunEndTime: &earlier,
		Conditions: ready(metav1.ConditionTrue, deckhandbatchv1.ReasonActive, "deleting the finished Jobs this watcher governs when they expire", earlier)}

	tests := map[string]struct {
		old     deckhandbatchv1.JobWatcherStatus
		self    *compiledWatcher
		s       summary
		deleted deletions
		want    deckhandbatchv1.JobWatcherStatus
	}{
		"first status": {
			self: active, s: summary{Matched: 2, Pending: 1, Next: &next}, deleted: deletions{instance: "me", n: 0},
			want: deckhandbatchv1.JobWatcherStatus{MatchedJobs: 2, PendingDeletions: 1, ObservedGeneration: 3,
				NextDeletionTime: ptr.To(metav1.NewTime(next.Truncate(time.Second))),
				LastRunStartTime: ptr.To(metav1.NewTime(start)), LastRunEndTime: ptr.To(metav1.NewTime(end)),
				Conditions: activeReady},
		},
		"nothing changed: the run times stay": {
			old: settled, self: active, s: summary{Matched: 2, Pending: 1, Next: &next}, deleted: deletions{instance: "me", n: 0},
			want: settled,
		},
		"a deletion counted": {
			old: settled, self: active, s: summary{Matched: 1}, deleted: deletions{instance: "me", n: 1},
			want: deckhandbatchv1.JobWatcherStatus{MatchedJobs: 1, ObservedGeneration: 3, DeletedJobs: 1, CountedDeletions: "me/1",
				LastRunStartTime: ptr.To(metav1.NewTime(start)), LastRunEndTime: ptr.To(metav1.NewTime(end)),
				Conditions: settled.Conditions},
		},
		"dry run lists what it would delete": {
			self: jw("ns", "w", ptr.To[int32](60), nil, func(p *deckhandbatchv1.JobPolicy) { p.DryRun = true }),
			s:    summary{Matched: 1, WouldDelete: []string{"ns/pi"}}, deleted: deletions{instance: "me", n: 0},
			want: deckhandbatchv1.JobWatcherStatus{MatchedJobs: 1, WouldDelete: []string{"ns/pi"},
				LastRunStartTime: ptr.To(metav1.NewTime(start)), LastRunEndTime: ptr.To(metav1.NewTime(end)),
				Conditions: []metav1.Condition{{Type: deckhandbatchv1.ConditionReady, Status: metav1.ConditionTrue, Reason: deckhandbatchv1.ReasonDryRun,
					Message: "dry run: expired Jobs are listed in status.wouldDelete, none is deleted", LastTransitionTime: metav1.NewTime(start)}}},
		},
		"suspended": {
			self: jw("ns", "w", ptr.To[int32](60), nil, func(p *deckhandbatchv1.JobPolicy) { p.Suspend = true }),
			s:    summary{Matched: 1, Pending: 1}, deleted: deletions{instance: "me", n: 0},
			want: deckhandbatchv1.JobWatcherStatus{MatchedJobs: 1, PendingDeletions: 1,
				LastRunStartTime: ptr.To(metav1.NewTime(start)), LastRunEndTime: ptr.To(metav1.NewTime(end)),
				Conditions: []metav1.Condition{{Type: deckhandbatchv1.ConditionReady, Status: metav1.ConditionFalse, Reason: deckhandbatchv1.ReasonSuspended,
					Message: "suspended: the Jobs this watcher governs are kept until it resumes", LastTransitionTime: metav1.NewTime(start)}}},
		},
		"breaker tripped": {
			old: settled, self: active, s: summary{Matched: 2, Pending: 1, Next: &next, Breaker: breakerState{tripped: true, message: "paused"}},
			deleted: deletions{instance: "me", n: 0},
			want: deckhandbatchv1.JobWatcherStatus{MatchedJobs: 2, PendingDeletions: 1, ObservedGeneration: 3,
				NextDeletionTime: settled.NextDeletionTime,
				LastRunStartTime: ptr.To(metav1.NewTime(start)), LastRunEndTime: ptr.To(metav1.NewTime(end)),
				Conditions: []metav1.Condition{
					{Type: deckhandbatchv1.ConditionReady, Status: metav1.ConditionFalse, Reason: deckhandbatchv1.ReasonTooManyDeletions,
						Message: "paused", ObservedGeneration: 3, LastTransitionTime: metav1.NewTime(start)},
					{Type: deckhandbatchv1.ConditionDeletionsPaused, Status: metav1.ConditionTrue, Reason: deckhandbatchv1.ReasonTooManyDeletions,
						Message: "paused", ObservedGeneration: 3, LastTransitionTime: metav1.NewTime(start)}}},
		},
		"invalid spec": {
			self: jw("ns", "w", ptr.To[int32](60), nil, names("([a-z")), deleted: deletions{instance: "me", n: 0},
			want: deckhandbatchv1.JobWatcherStatus{
				LastRunStartTime: ptr.To(metav1.NewTime(start)), LastRunEndTime: ptr.To(metav1.NewTime(end)),
				Conditions: []metav1.Condition{{Type: deckhandbatchv1.ConditionReady, Status: metav1.ConditionFalse, Reason: deckhandbatchv1.ReasonInvalidSpec,
					Message: "spec.jobNamePatterns[0]: error parsing regexp: missing closing ]: `[a-z`; the watcher matches no Job", LastTransitionTime: metav1.NewTime(start)}}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := computeStatus(tc.old, tc.self, tc.s, tc.deleted, start, end)
			if !equality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("computeStatus =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}
