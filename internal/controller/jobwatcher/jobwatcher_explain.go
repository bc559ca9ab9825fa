package jobwatcher

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Explanation is what the controller decides for one Job and why, for a
// person asking (`kubectl deckhand why job`). Verdict is one of the
// verdicts the controller reports in its metrics and Events: Running,
// OwnTTL, Keep, InvalidTTLAnnotation, NoFinishTime, Unwatched, NoTTL,
// InHistory or Expires.
type Explanation struct {
	Verdict string
	// Outcome is how the Job finished: Succeeded, Failed, or empty.
	Outcome string
	// Governor names the watcher whose policy decides ("JobWatcher/ns/name"
	// or "ClusterJobWatcher/name"), empty when none does.
	Governor string
	// TTL is how long the governor lets the Job stay after it finished;
	// Expiry is when it goes (zero unless the Verdict is Expires).
	TTL    time.Duration
	Expiry time.Time
	// BeyondHistory: the Job goes at once, beyond the governor's history
	// limit.
	BeyondHistory bool
	// Matching names every watcher whose patterns match the Job, nearest
	// first (the namespace's JobWatchers before ClusterJobWatchers).
	Matching []string
}

// Explain decides for job as the controller does, from the watchers
// (JobWatchers and ClusterJobWatchers, any namespace: those that do not
// reach the Job are skipped), the Jobs of its namespace (for history
// limits) and the protected namespaces: those named (the defaults when
// nil) and those labelled so, read through namespaces (none when nil). It
// writes nothing.
func Explain(job *batchv1.Job, watchers []client.Object, jobs []batchv1.Job, protectedNames []string, namespaces client.Reader) Explanation {
	protected := newProtection(protectedNames, namespaces)
	var compiled []*compiledWatcher
	for _, w := range watchers {
		if c := (*CompiledSpecs)(nil).watcherOf(w, protected); c != nil {
			compiled = append(compiled, c)
		}
	}
	var h history
	if anyHistoryLimits(compiled) {
		h = historyOf(compiled, jobs)
	}
	d := decide(job, compiled, h)
	e := Explanation{Verdict: string(d.Verdict), Outcome: string(d.Outcome), TTL: d.TTL, Expiry: d.Expiry, BeyondHistory: d.BeyondHistory}
	if d.Governor != nil {
		e.Governor = d.Governor.key().String()
	}
	var namespaced, cluster []string
	for _, c := range compiled {
		if !c.matches(job) {
			continue
		}
		if c.cluster {
			cluster = append(cluster, c.key().String())
		} else {
			namespaced = append(namespaced, c.key().String())
		}
	}
	e.Matching = append(namespaced, cluster...)
	return e
}
