package jobwatcher

import (
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
)

func limits(succeeded, failed *int32, groupBy string) func(*deckhandbatchv1.JobPolicy) {
	return func(p *deckhandbatchv1.JobPolicy) {
		p.SuccessfulJobsHistoryLimit, p.FailedJobsHistoryLimit, p.HistoryGroupBy = succeeded, failed, groupBy
	}
}

// finishedAgo finishes a Job at finishedAt minus d (newer Jobs have smaller d).
func finishedAgo(t batchv1.JobConditionType, d time.Duration) jobOpt {
	return func(j *batchv1.Job) {
		j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{
			Type: t, Status: "True", LastTransitionTime: metav1.NewTime(finishedAt.Add(-d))})
	}
}

func TestHistoryOf(t *testing.T) {
	ns := "a"
	jobs := []batchv1.Job{
		*testJob(ns, "nightly-3", finishedAgo(batchv1.JobComplete, 1*time.Hour)),
		*testJob(ns, "nightly-1", finishedAgo(batchv1.JobComplete, 3*time.Hour)),
		*testJob(ns, "nightly-2", finishedAgo(batchv1.JobComplete, 2*time.Hour)),
		*testJob(ns, "nightly-f1", finishedAgo(batchv1.JobFailed, 5*time.Hour)),
		*testJob(ns, "nightly-f2", finishedAgo(batchv1.JobFailed, 4*time.Hour)),
		*testJob(ns, "hourly-1", finishedAgo(batchv1.JobComplete, 30*time.Minute)),
		*testJob(ns, "hourly-2", finishedAgo(batchv1.JobComplete, 20*time.Minute)),
		*testJob(ns, "running-1"),
		*testJob(ns, "going-1", finishedAgo(batchv1.JobComplete, 9*time.Hour), func(j *batchv1.Job) { j.DeletionTimestamp = ptr.To(metav1.Now()) }),
	}
	tests := map[string]struct {
		policy *compiledWatcher
		want   []string
	}{
		"no limits": {jw(ns, "w", ptr.To[int32](60), nil), nil},
		"newest 2 succeeded, per namespace": {jw(ns, "w", nil, nil, limits(ptr.To[int32](2), nil, "")),
			[]string{"nightly-1", "nightly-2", "nightly-3"}},
		"newest 2 succeeded, per name prefix": {jw(ns, "w", nil, nil, limits(ptr.To[int32](2), nil, deckhandbatchv1.HistoryByNamePrefix)),
			[]string{"nightly-1"}},
		"newest failed only":       {jw(ns, "w", nil, nil, limits(nil, ptr.To[int32](1), "")), []string{"nightly-f1"}},
		"zero keeps none":          {jw(ns, "w", nil, nil, limits(nil, ptr.To[int32](0), "")), []string{"nightly-f1", "nightly-f2"}},
		"only the Jobs it matches": {jw(ns, "w", nil, nil, names("hourly-.*"), limits(ptr.To[int32](1), nil, "")), []string{"hourly-1"}},
		"another namespace's Jobs": {jw("b", "w", nil, nil, limits(ptr.To[int32](0), nil, "")), nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := historyOf([]*compiledWatcher{tc.policy}, jobs)
			var got []string
			for i := range jobs {
				if h.beyond(tc.policy, &jobs[i]) {
					got = append(got, jobs[i].Name)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("beyond the limit: %v, want %v", got, tc.want)
			}
		})
	}
}

// History limits and precedence: a Job beyond a watcher's limit goes at once
// only if no other policy that the precedence lets speak keeps it longer.
func TestDecideWithHistory(t *testing.T) {
	ns := "a"
	job := testJob(ns, "pi", succeeded)
	limited := jw(ns, "limited", ptr.To[int32](3600), nil, limits(ptr.To[int32](1), nil, ""))
	onlyLimit := jw(ns, "only-limit", nil, nil, limits(ptr.To[int32](1), nil, ""))
	longTTL := jw(ns, "long", ptr.To[int32](7200), nil)
	clusterLimited := cjw("cluster", ptr.To[int32](600), nil, nil, nil, limits(ptr.To[int32](0), nil, ""))
	tests := map[string]struct {
		job      *batchv1.Job
		watchers []*compiledWatcher
		beyond   []*compiledWatcher
		verdict  verdict
		governor string
		ttl      time.Duration
		early    bool
	}{
		"within the limit, the TTL":              {job, []*compiledWatcher{limited}, nil, verdictExpires, "limited", time.Hour, false},
		"beyond the limit, at once":              {job, []*compiledWatcher{limited}, []*compiledWatcher{limited}, verdictExpires, "limited", 0, true},
		"a limit alone keeps the newest":         {job, []*compiledWatcher{onlyLimit}, nil, verdictInHistory, "", 0, false},
		"a limit alone lets older ones go":       {job, []*compiledWatcher{onlyLimit}, []*compiledWatcher{onlyLimit}, verdictExpires, "only-limit", 0, true},
		"a longer TTL in the level keeps it":     {job, []*compiledWatcher{limited, longTTL}, []*compiledWatcher{limited}, verdictExpires, "long", 2 * time.Hour, false},
		"a limit alone and a TTL: the TTL":       {job, []*compiledWatcher{onlyLimit, longTTL}, []*compiledWatcher{onlyLimit}, verdictExpires, "long", 2 * time.Hour, false},
		"a namespaced TTL over a cluster limit":  {job, []*compiledWatcher{clusterLimited, longTTL}, []*compiledWatcher{clusterLimited}, verdictExpires, "long", 2 * time.Hour, false},
		"a cluster limit when no namespaced say": {job, []*compiledWatcher{clusterLimited}, []*compiledWatcher{clusterLimited}, verdictExpires, "cluster", 0, true},
		"the ttl annotation overrides a limit": {testJob(ns, "pi", succeeded, withAnnotation(deckhandbatchv1.TTLAnnotation, "36h")),
			[]*compiledWatcher{limited}, []*compiledWatcher{limited}, verdictExpires, "limited", 36 * time.Hour, false},
		"keep overrides a limit": {testJob(ns, "pi", succeeded, withAnnotation(deckhandbatchv1.KeepAnnotation, "true")),
			[]*compiledWatcher{limited}, []*compiledWatcher{limited}, verdictKeep, "", 0, false},
		"a failed Job is not counted by a succeeded limit": {testJob(ns, "pi", failed), []*compiledWatcher{onlyLimit}, []*compiledWatcher{onlyLimit}, verdictNoTTL, "", 0, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := history{}
			for _, p := range tc.beyond {
				h[historyKey{p.watcher.GetUID(), client.ObjectKeyFromObject(tc.job)}] = true
			}
			d := decide(tc.job, tc.watchers, h)
			if d.Verdict != tc.verdict {
				t.Fatalf("verdict = %s, want %s", d.Verdict, tc.verdict)
			}
			if tc.verdict != verdictExpires {
				return
			}
			if d.Governor.watcher.GetName() != tc.governor || d.TTL != tc.ttl || d.BeyondHistory != tc.early {
				t.Errorf("governor %q, TTL %s, beyond history %v; want %q, %s, %v",
					d.Governor.watcher.GetName(), d.TTL, d.BeyondHistory, tc.governor, tc.ttl, tc.early)
			}
		})
	}
}
