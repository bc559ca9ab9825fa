package batch

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
)

// policy is one watcher, compiled: what it matches and how long the Jobs it
// governs stay.
type policy struct {
	// watcher is the JobWatcher or ClusterJobWatcher itself.
	watcher client.Object
	// cluster is true for a ClusterJobWatcher.
	cluster bool
	spec    *deckhandbatchv1.JobPolicy

	names, excludeNames           []*regexp.Regexp
	namespaces, excludeNamespaces []*regexp.Regexp
	selector                      labels.Selector
	// err says why the spec cannot be used; such a policy matches nothing.
	err error
}

func newJobWatcherPolicy(w *deckhandbatchv1.JobWatcher) *policy {
	p := &policy{watcher: w, spec: &w.Spec.JobPolicy}
	p.compile(nil, nil)
	return p
}

func newClusterJobWatcherPolicy(w *deckhandbatchv1.ClusterJobWatcher) *policy {
	p := &policy{watcher: w, cluster: true, spec: &w.Spec.JobPolicy}
	p.compile(w.Spec.NamespacePatterns, w.Spec.ExcludeNamespacePatterns)
	return p
}

// policyOf compiles a JobWatcher or ClusterJobWatcher; nil for anything else.
func policyOf(obj client.Object) *policy {
	switch w := obj.(type) {
	case *deckhandbatchv1.JobWatcher:
		return newJobWatcherPolicy(w)
	case *deckhandbatchv1.ClusterJobWatcher:
		return newClusterJobWatcherPolicy(w)
	}
	return nil
}

func (p *policy) compile(namespaces, excludeNamespaces []string) {
	var errs []error
	compileAll := func(field string, patterns []string) []*regexp.Regexp {
		out := make([]*regexp.Regexp, 0, len(patterns))
		for i, pat := range patterns {
			re, err := deckhandbatchv1.CompilePattern(pat)
			if err != nil {
				errs = append(errs, fmt.Errorf("spec.%s[%d]: %w", field, i, err))
				continue
			}
			out = append(out, re)
		}
		return out
	}
	p.names = compileAll("jobNamePatterns", p.spec.JobNamePatterns)
	p.excludeNames = compileAll("excludeJobNamePatterns", p.spec.ExcludeJobNamePatterns)
	p.namespaces = compileAll("namespacePatterns", namespaces)
	p.excludeNamespaces = compileAll("excludeNamespacePatterns", excludeNamespaces)
	p.selector = labels.Everything()
	if p.spec.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(p.spec.Selector)
		if err != nil {
			errs = append(errs, fmt.Errorf("spec.selector: %w", err))
		} else {
			p.selector = sel
		}
	}
	p.err = errors.Join(errs...)
}

// reaches reports whether the watcher may act in namespace ns: a JobWatcher
// only in its own, a ClusterJobWatcher where its patterns say.
func (p *policy) reaches(ns string) bool {
	if p.err != nil {
		return false
	}
	if !p.cluster {
		return ns == p.watcher.GetNamespace()
	}
	return matchesAny(p.namespaces, ns, true) && !matchesAny(p.excludeNamespaces, ns, false)
}

// matches reports whether the watcher selects the Job.
func (p *policy) matches(job *batchv1.Job) bool {
	return p.reaches(job.Namespace) &&
		matchesAny(p.names, job.Name, true) && !matchesAny(p.excludeNames, job.Name, false) &&
		p.selector.Matches(labels.Set(job.Labels))
}

// matchesAny reports whether s matches one of res; an empty list gives empty.
func matchesAny(res []*regexp.Regexp, s string, empty bool) bool {
	if len(res) == 0 {
		return empty
	}
	return slices.ContainsFunc(res, func(re *regexp.Regexp) bool { return re.MatchString(s) })
}

// ttl is the watcher's TTL for Jobs with outcome o; false when it has none.
func (p *policy) ttl(o outcome) (time.Duration, bool) {
	s := p.spec.TTLSecondsAfterSucceeded
	if o == outcomeFailed {
		s = p.spec.TTLSecondsAfterFailed
	}
	if s == nil {
		return 0, false
	}
	return time.Duration(*s) * time.Second, true
}

func (p *policy) propagation() metav1.DeletionPropagation {
	if p.spec.PropagationPolicy == nil {
		return metav1.DeletePropagationBackground
	}
	return *p.spec.PropagationPolicy
}

// key names the watcher in logs, Events, metrics and status lists.
func (p *policy) key() watcherKey {
	k := watcherKey{Kind: "JobWatcher", Namespace: p.watcher.GetNamespace(), Name: p.watcher.GetName(), UID: p.watcher.GetUID()}
	if p.cluster {
		k.Kind = "ClusterJobWatcher"
	}
	return k
}

// watcherKey identifies one watcher of either kind.
type watcherKey struct {
	Kind, Namespace, Name string
	UID                   types.UID
}

func (k watcherKey) String() string {
	if k.Namespace == "" {
		return k.Kind + "/" + k.Name
	}
	return k.Kind + "/" + k.Namespace + "/" + k.Name
}

// outcome is how a Job finished.
type outcome string

const (
	outcomeSucceeded outcome = "Succeeded"
	outcomeFailed    outcome = "Failed"
)

// finished reports how and when the Job finished, as Kubernetes' TTL
// controller reads it: the time its Complete or Failed condition turned true.
func finished(job *batchv1.Job) (outcome, time.Time, bool) {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return outcomeSucceeded, c.LastTransitionTime.Time, true
		case batchv1.JobFailed:
			return outcomeFailed, c.LastTransitionTime.Time, true
		}
	}
	return "", time.Time{}, false
}

// verdict is why a Job stays or goes.
type verdict string

const (
	// verdictRunning: the Job has not finished.
	verdictRunning verdict = "Running"
	// verdictOwnTTL: the Job sets spec.ttlSecondsAfterFinished; Kubernetes'
	// TTL controller deletes it.
	verdictOwnTTL verdict = "OwnTTL"
	// verdictKeep: the Job is annotated batch.deckhand.dev/keep: "true".
	verdictKeep verdict = "Keep"
	// verdictBadAnnotation: batch.deckhand.dev/ttl does not parse; kept.
	verdictBadAnnotation verdict = "InvalidTTLAnnotation"
	// verdictUnwatched: no watcher reaches the Job.
	verdictUnwatched verdict = "Unwatched"
	// verdictNoTTL: watchers match but none has a TTL for its outcome.
	verdictNoTTL verdict = "NoTTL"
	// verdictExpires: the Job goes at decision.Expiry, by decision.Governor.
	verdictExpires verdict = "Expires"
)

// decision is what happens to one Job.
type decision struct {
	Verdict verdict
	Outcome outcome
	// Governor is the watcher whose rules apply (its dry run, suspension and
	// propagation policy, and who is credited with the deletion).
	Governor *policy
	TTL      time.Duration
	Expiry   time.Time
}

// due reports whether the Job should go now.
func (d decision) due(now time.Time) bool {
	return d.Verdict == verdictExpires && !now.Before(d.Expiry)
}

// decide applies the precedence: the Job's own ttlSecondsAfterFinished (left
// to Kubernetes) > its batch.deckhand.dev/keep and batch.deckhand.dev/ttl
// annotations > the JobWatchers of its namespace > ClusterJobWatchers; within
// a level the longest TTL wins, so no Job goes sooner than any matching
// policy allows. Annotations only apply to Jobs some watcher reaches: a Job
// no watcher matches is never Deckhand's to delete. policies may hold
// watchers of any namespace; the ones that do not match the Job are skipped.
func decide(job *batchv1.Job, policies []*policy) decision {
	o, at, ok := finished(job)
	switch {
	case job.Spec.TTLSecondsAfterFinished != nil:
		return decision{Verdict: verdictOwnTTL, Outcome: o}
	case !ok:
		return decision{Verdict: verdictRunning}
	case job.Annotations[deckhandbatchv1.KeepAnnotation] == "true":
		return decision{Verdict: verdictKeep, Outcome: o}
	}

	var namespaced, cluster []*policy
	for _, p := range policies {
		if !p.matches(job) {
			continue
		}
		if p.cluster {
			cluster = append(cluster, p)
		} else {
			namespaced = append(namespaced, p)
		}
	}
	slices.SortFunc(namespaced, comparePolicies)
	slices.SortFunc(cluster, comparePolicies)
	matched := slices.Concat(namespaced, cluster)
	if len(matched) == 0 {
		return decision{Verdict: verdictUnwatched, Outcome: o}
	}

	d := decision{Verdict: verdictExpires, Outcome: o}
	if g, ttl, ok := longest(namespaced, o); ok {
		d.Governor, d.TTL = g, ttl
	} else if g, ttl, ok := longest(cluster, o); ok {
		d.Governor, d.TTL = g, ttl
	}
	if s, ok := job.Annotations[deckhandbatchv1.TTLAnnotation]; ok {
		ttl, err := time.ParseDuration(s)
		if err != nil || ttl < 0 {
			return decision{Verdict: verdictBadAnnotation, Outcome: o}
		}
		if d.Governor == nil {
			// The annotation gives the TTL; the nearest matching watcher
			// gives the reach and the mode.
			d.Governor = matched[0]
		}
		d.TTL = ttl
	}
	if d.Governor == nil {
		return decision{Verdict: verdictNoTTL, Outcome: o}
	}
	d.Expiry = at.Add(d.TTL)
	return d
}

// longest returns the policy with the longest TTL for outcome o among ps
// (sorted); ties go to the first, so every reader picks the same governor.
func longest(ps []*policy, o outcome) (*policy, time.Duration, bool) {
	var best *policy
	var bestTTL time.Duration
	for _, p := range ps {
		ttl, ok := p.ttl(o)
		if !ok {
			continue
		}
		if best == nil || ttl > bestTTL {
			best, bestTTL = p, ttl
		}
	}
	return best, bestTTL, best != nil
}

func comparePolicies(a, b *policy) int {
	return cmp.Or(
		cmp.Compare(a.watcher.GetNamespace(), b.watcher.GetNamespace()),
		cmp.Compare(a.watcher.GetName(), b.watcher.GetName()))
}
