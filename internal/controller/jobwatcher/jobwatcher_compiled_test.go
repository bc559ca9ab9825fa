package jobwatcher

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
)

var finishedAt = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

type jobOpt func(*batchv1.Job)

func testJob(ns, name string, opts ...jobOpt) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	for _, o := range opts {
		o(j)
	}
	return j
}

func withCondition(t batchv1.JobConditionType) jobOpt {
	return func(j *batchv1.Job) {
		j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{
			Type: t, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(finishedAt)})
	}
}

var (
	succeeded = withCondition(batchv1.JobComplete)
	failed    = withCondition(batchv1.JobFailed)
)

func withAnnotation(k, v string) jobOpt {
	return func(j *batchv1.Job) { metav1.SetMetaDataAnnotation(&j.ObjectMeta, k, v) }
}

func withLabel(k, v string) jobOpt {
	return func(j *batchv1.Job) { metav1.SetMetaDataLabel(&j.ObjectMeta, k, v) }
}

func jw(ns, name string, succeededTTL, failedTTL *int32, mutate ...func(*deckhandbatchv1.JobPolicy)) *compiledWatcher {
	w := &deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name)}}
	w.Spec.TTLSecondsAfterSucceeded, w.Spec.TTLSecondsAfterFailed = succeededTTL, failedTTL
	for _, m := range mutate {
		m(&w.Spec.JobPolicy)
	}
	return compileJobWatcher(w)
}

func cjw(name string, succeededTTL, failedTTL *int32, namespaces, excluded []string, mutate ...func(*deckhandbatchv1.JobPolicy)) *compiledWatcher {
	w := &deckhandbatchv1.ClusterJobWatcher{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)}}
	w.Spec.TTLSecondsAfterSucceeded, w.Spec.TTLSecondsAfterFailed = succeededTTL, failedTTL
	w.Spec.NamespacePatterns, w.Spec.ExcludeNamespacePatterns = namespaces, excluded
	for _, m := range mutate {
		m(&w.Spec.JobPolicy)
	}
	return compileClusterJobWatcher(w, newProtection(nil, nil))
}

func names(patterns ...string) func(*deckhandbatchv1.JobPolicy) {
	return func(p *deckhandbatchv1.JobPolicy) { p.JobNamePatterns = patterns }
}

func excludeNames(patterns ...string) func(*deckhandbatchv1.JobPolicy) {
	return func(p *deckhandbatchv1.JobPolicy) { p.ExcludeJobNamePatterns = patterns }
}

func selector(k, v string) func(*deckhandbatchv1.JobPolicy) {
	return func(p *deckhandbatchv1.JobPolicy) {
		p.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
	}
}

func TestPolicyMatches(t *testing.T) {
	tests := map[string]struct {
		policy *compiledWatcher
		job    *batchv1.Job
		want   bool
	}{
		"job watcher, own namespace":             {jw("team-a", "w", ptr.To[int32](1), nil), testJob("team-a", "pi"), true},
		"job watcher, other namespace":           {jw("team-a", "w", ptr.To[int32](1), nil), testJob("team-b", "pi"), false},
		"name pattern matches the whole name":    {jw("a", "w", ptr.To[int32](1), nil, names("pi-.*")), testJob("a", "pi-1"), true},
		"name pattern is anchored":               {jw("a", "w", ptr.To[int32](1), nil, names("pi")), testJob("a", "api-1"), false},
		"one of several name patterns":           {jw("a", "w", ptr.To[int32](1), nil, names("x", "pi-[0-9]+")), testJob("a", "pi-42"), true},
		"excluded name":                          {jw("a", "w", ptr.To[int32](1), nil, excludeNames("keep-.*")), testJob("a", "keep-me"), false},
		"exclusion wins over inclusion":          {jw("a", "w", ptr.To[int32](1), nil, names(".*"), excludeNames("pi")), testJob("a", "pi"), false},
		"selector matches":                       {jw("a", "w", ptr.To[int32](1), nil, selector("tier", "batch")), testJob("a", "pi", withLabel("tier", "batch")), true},
		"selector does not match":                {jw("a", "w", ptr.To[int32](1), nil, selector("tier", "batch")), testJob("a", "pi"), false},
		"cluster watcher, every namespace":       {cjw("c", ptr.To[int32](1), nil, nil, nil), testJob("anything", "pi"), true},
		"cluster watcher, namespace pattern":     {cjw("c", ptr.To[int32](1), nil, []string{"team-.*"}, nil), testJob("team-x", "pi"), true},
		"cluster watcher, pattern anchored":      {cjw("c", ptr.To[int32](1), nil, []string{"team-.*"}, nil), testJob("my-team-x", "pi"), false},
		"cluster watcher, excluded namespace":    {cjw("c", ptr.To[int32](1), nil, []string{"team-.*"}, []string{"team-prod"}), testJob("team-prod", "pi"), false},
		"invalid pattern matches nothing":        {jw("a", "w", ptr.To[int32](1), nil, names("([a-z")), testJob("a", "pi"), false},
		"invalid exclusion matches nothing":      {jw("a", "w", ptr.To[int32](1), nil, excludeNames("([a-z")), testJob("a", "pi"), false},
		"invalid namespace pattern, nothing":     {cjw("c", ptr.To[int32](1), nil, []string{"(("}, nil), testJob("a", "pi"), false},
		"cluster watcher with name pattern miss": {cjw("c", ptr.To[int32](1), nil, nil, nil, names("x")), testJob("a", "pi"), false},
		"cluster watcher, not kube-system":       {cjw("c", ptr.To[int32](1), nil, nil, nil), testJob("kube-system", "pi"), false},
		"cluster watcher, not kube-public":       {cjw("c", ptr.To[int32](1), nil, []string{".*"}, nil), testJob("kube-public", "pi"), false},
		"cluster watcher, not kube-node-lease":   {cjw("c", ptr.To[int32](1), nil, []string{"kube-.*"}, nil), testJob("kube-node-lease", "pi"), false},
		"cluster watcher, a wildcard is no name": {cjw("c", ptr.To[int32](1), nil, []string{"kube-syste."}, nil), testJob("kube-system", "pi"), false},
		"cluster watcher, case folding no name":  {cjw("c", ptr.To[int32](1), nil, []string{"(?i)KUBE-SYSTEM"}, nil), testJob("kube-system", "pi"), false},
		"cluster watcher, kube-system by name":   {cjw("c", ptr.To[int32](1), nil, []string{"team-.*", "kube-system"}, nil), testJob("kube-system", "pi"), true},
		"cluster watcher, escaped name is name":  {cjw("c", ptr.To[int32](1), nil, []string{`kube\-system`}, nil), testJob("kube-system", "pi"), true},
		"cluster watcher, named but excluded":    {cjw("c", ptr.To[int32](1), nil, []string{"kube-system"}, []string{"kube-.*"}), testJob("kube-system", "pi"), false},
		"job watcher in kube-system, its own":    {jw("kube-system", "w", ptr.To[int32](1), nil), testJob("kube-system", "pi"), true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.policy.matches(tc.job); got != tc.want {
				t.Errorf("matches = %v, want %v (policy err: %v)", got, tc.want, tc.policy.err)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	ns := "team-a"
	short, long := jw(ns, "short", ptr.To[int32](10), ptr.To[int32](100)), jw(ns, "long", ptr.To[int32](60), nil)
	clusterWide := cjw("cluster", ptr.To[int32](600), ptr.To[int32](86400), []string{"team-.*"}, nil)
	clusterShort := cjw("cluster-short", ptr.To[int32](5), ptr.To[int32](5), nil, nil)
	other := jw("team-b", "other", ptr.To[int32](1), ptr.To[int32](1))
	dry := jw(ns, "dry", ptr.To[int32](30), nil, func(p *deckhandbatchv1.JobPolicy) { p.DryRun = true })

	tests := map[string]struct {
		job      *batchv1.Job
		watchers []*compiledWatcher
		verdict  verdict
		governor string
		ttl      time.Duration
	}{
		"running Job":                {testJob(ns, "pi"), []*compiledWatcher{short}, verdictRunning, "", 0},
		"own TTL left to Kubernetes": {testJob(ns, "pi", succeeded, func(j *batchv1.Job) { j.Spec.TTLSecondsAfterFinished = ptr.To[int32](3) }), []*compiledWatcher{short}, verdictOwnTTL, "", 0},
		"finished at no time is kept": {testJob(ns, "pi", func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
		}), []*compiledWatcher{short}, verdictNoFinishTime, "", 0},
		"no watcher":                     {testJob(ns, "pi", succeeded), nil, verdictUnwatched, "", 0},
		"watcher of another namespace":   {testJob(ns, "pi", succeeded), []*compiledWatcher{other}, verdictUnwatched, "", 0},
		"succeeded TTL":                  {testJob(ns, "pi", succeeded), []*compiledWatcher{short}, verdictExpires, "short", 10 * time.Second},
		"failed TTL":                     {testJob(ns, "pi", failed), []*compiledWatcher{short}, verdictExpires, "short", 100 * time.Second},
		"no TTL for the outcome":         {testJob(ns, "pi", failed), []*compiledWatcher{long}, verdictNoTTL, "", 0},
		"longest TTL wins in a level":    {testJob(ns, "pi", succeeded), []*compiledWatcher{short, long}, verdictExpires, "long", time.Minute},
		"level falls through by outcome": {testJob(ns, "pi", failed), []*compiledWatcher{long, clusterWide}, verdictExpires, "cluster", 24 * time.Hour},
		"namespaced over cluster-wide, even when shorter": {
			testJob(ns, "pi", succeeded), []*compiledWatcher{clusterWide, short}, verdictExpires, "short", 10 * time.Second},
		"longest cluster-wide TTL":  {testJob(ns, "pi", succeeded), []*compiledWatcher{clusterShort, clusterWide}, verdictExpires, "cluster", 10 * time.Minute},
		"cluster-wide out of reach": {testJob("prod", "pi", succeeded), []*compiledWatcher{clusterWide}, verdictUnwatched, "", 0},
		"keep annotation":           {testJob(ns, "pi", succeeded, withAnnotation(deckhandbatchv1.KeepAnnotation, "true")), []*compiledWatcher{short}, verdictKeep, "", 0},
		"keep annotation not true":  {testJob(ns, "pi", succeeded, withAnnotation(deckhandbatchv1.KeepAnnotation, "no")), []*compiledWatcher{short}, verdictExpires, "short", 10 * time.Second},
		"keep over ttl annotation": {testJob(ns, "pi", succeeded, withAnnotation(deckhandbatchv1.KeepAnnotation, "true"),
			withAnnotation(deckhandbatchv1.TTLAnnotation, "1s")), []*compiledWatcher{short}, verdictKeep, "", 0},
		"ttl annotation shortens":        {testJob(ns, "pi", succeeded, withAnnotation(deckhandbatchv1.TTLAnnotation, "2s")), []*compiledWatcher{long}, verdictExpires, "long", 2 * time.Second},
		"ttl annotation lengthens":       {testJob(ns, "pi", succeeded, withAnnotation(deckhandbatchv1.TTLAnnotation, "36h")), []*compiledWatcher{short, clusterWide}, verdictExpires, "short", 36 * time.Hour},
		"ttl annotation needs a watcher": {testJob(ns, "pi", succeeded, withAnnotation(deckhandbatchv1.TTLAnnotation, "1s")), nil, verdictUnwatched, "", 0},
		"ttl annotation covers an outcome no watcher has": {
			testJob(ns, "pi", failed, withAnnotation(deckhandbatchv1.TTLAnnotation, "1m")), []*compiledWatcher{long}, verdictExpires, "long", time.Minute},
		"bad ttl annotation keeps":          {testJob(ns, "pi", succeeded, withAnnotation(deckhandbatchv1.TTLAnnotation, "soon")), []*compiledWatcher{short}, verdictBadAnnotation, "", 0},
		"negative ttl annotation keeps":     {testJob(ns, "pi", succeeded, withAnnotation(deckhandbatchv1.TTLAnnotation, "-1s")), []*compiledWatcher{short}, verdictBadAnnotation, "", 0},
		"dry-run watcher competes like any": {testJob(ns, "pi", succeeded), []*compiledWatcher{short, dry}, verdictExpires, "dry", 30 * time.Second},
		"name-pattern miss falls to cluster": {testJob(ns, "other", succeeded),
			[]*compiledWatcher{jw(ns, "pi-only", ptr.To[int32](1), nil, names("pi")), clusterWide}, verdictExpires, "cluster", 10 * time.Minute},
		"tie goes to the first by name": {testJob(ns, "pi", succeeded),
			[]*compiledWatcher{jw(ns, "b", ptr.To[int32](5), nil), jw(ns, "a", ptr.To[int32](5), nil)}, verdictExpires, "a", 5 * time.Second},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := decide(tc.job, tc.watchers, nil)
			if d.Verdict != tc.verdict {
				t.Fatalf("verdict = %s, want %s", d.Verdict, tc.verdict)
			}
			gov := ""
			if d.Governor != nil {
				gov = d.Governor.watcher.GetName()
			}
			if tc.verdict != verdictExpires {
				return
			}
			if gov != tc.governor || d.TTL != tc.ttl {
				t.Errorf("governor %q with TTL %s, want %q with %s", gov, d.TTL, tc.governor, tc.ttl)
			}
			if want := finishedAt.Add(tc.ttl); !d.Expiry.Equal(want) {
				t.Errorf("expiry %s, want %s", d.Expiry, want)
			}
			if d.due(finishedAt.Add(tc.ttl-time.Millisecond)) || !d.due(finishedAt.Add(tc.ttl)) {
				t.Errorf("due before %s or not at it", d.Expiry)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	ns := "a"
	live := jw(ns, "live", ptr.To[int32](60), nil)
	dry := jw(ns, "dry", ptr.To[int32](10), ptr.To[int32](10), func(p *deckhandbatchv1.JobPolicy) { p.DryRun = true })
	watchers := []*compiledWatcher{live, dry}
	jobs := []batchv1.Job{
		*testJob(ns, "running"),
		*testJob(ns, "ok-1", succeeded),
		*testJob(ns, "ok-2", succeeded),
		*testJob(ns, "bad-1", failed),
		*testJob(ns, "kept", failed, withAnnotation(deckhandbatchv1.KeepAnnotation, "true")),
		*testJob(ns, "going", succeeded, func(j *batchv1.Job) { j.DeletionTimestamp = ptr.To(metav1.Now()) }),
	}
	now := finishedAt.Add(30 * time.Second)

	got := summarize(live, watchers, jobs, now)
	if got.Matched != 5 || got.Pending != 2 || got.Next == nil || !got.Next.Equal(finishedAt.Add(time.Minute)) || len(got.WouldDelete) != 0 {
		t.Errorf("live watcher: %+v", got)
	}
	got = summarize(dry, watchers, jobs, now)
	if got.Matched != 5 || got.Pending != 0 || got.Expired != 0 || got.Next != nil || len(got.WouldDelete) != 1 || got.WouldDelete[0] != "a/bad-1" {
		t.Errorf("dry-run watcher: %+v", got)
	}

	// Past their TTL, the live watcher's two succeeded Jobs are expired, as
	// long as it is not suspended.
	later := finishedAt.Add(2 * time.Minute)
	if got = summarize(live, watchers, jobs, later); got.Pending != 2 || got.Expired != 2 {
		t.Errorf("live watcher after the TTL: %+v", got)
	}
	if got = summarize(live, watchers, jobs, now); got.Expired != 0 {
		t.Errorf("live watcher before the TTL: %+v", got)
	}
	live.spec.Suspend = true
	if got = summarize(live, watchers, jobs, later); got.Pending != 2 || got.Expired != 0 {
		t.Errorf("suspended watcher after the TTL: %+v", got)
	}
}

// TestWatcherCompiledOncePerGeneration checks that a watcher's patterns are
// compiled once per generation, however many Job events read it, and again
// when its spec (generation) or identity (UID) changes or it is forgotten.
func TestWatcherCompiledOncePerGeneration(t *testing.T) {
	w := &deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: "compile", Name: "w", UID: "uid-1", Generation: 1}}
	w.Spec.TTLSecondsAfterSucceeded = ptr.To[int32](1)
	w.Spec.JobNamePatterns = []string{"pi-.*"}
	specs := NewCompiledSpecs()
	compilations := func() int {
		specs.mu.Lock()
		defer specs.mu.Unlock()
		return specs.compilations
	}
	compileJobWatcher := specs.jobWatcher
	start := compilations()
	for range 100 {
		if !compileJobWatcher(w.DeepCopy()).matches(testJob("compile", "pi-1", succeeded)) {
			t.Fatal("generation 1 does not match pi-1")
		}
	}
	if n := compilations() - start; n != 1 {
		t.Fatalf("100 reads of one generation compiled %d times, want 1", n)
	}
	w.Generation, w.Spec.JobNamePatterns = 2, []string{"other"}
	if compileJobWatcher(w.DeepCopy()).matches(testJob("compile", "pi-1", succeeded)) {
		t.Fatal("generation 2 matches with generation 1's patterns")
	}
	// A stale read of generation 1 compiles it, but does not replace 2.
	stale := w.DeepCopy()
	stale.Generation, stale.Spec.JobNamePatterns = 1, []string{"pi-.*"}
	compileJobWatcher(stale)
	compileJobWatcher(w.DeepCopy())
	if n := compilations() - start; n != 3 {
		t.Fatalf("compiled %d times, want 3 (generations 1, 2 and the stale 1)", n)
	}
	// The same name, another object.
	w.UID = "uid-2"
	compileJobWatcher(w.DeepCopy())
	specs.forget(false, types.NamespacedName{Namespace: "compile", Name: "w"})
	compileJobWatcher(w.DeepCopy())
	if n := compilations() - start; n != 5 {
		t.Fatalf("compiled %d times, want 5", n)
	}
}
