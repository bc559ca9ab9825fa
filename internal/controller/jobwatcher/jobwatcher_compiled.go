package jobwatcher

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"regexp/syntax"
	"slices"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	jobwatcherpolicy "github.com/deckhand-dev/deckhand/internal/controller/jobwatcher/policy"
)

// compiledWatcher is one watcher, compiled: what it matches and how long the Jobs it
// governs stay.
type compiledWatcher struct {
	// watcher is the JobWatcher or ClusterJobWatcher itself.
	watcher client.Object
	// cluster is true for a ClusterJobWatcher.
	cluster bool
	spec    *deckhandbatchv1.JobPolicy
	// protection is the namespaces a ClusterJobWatcher leaves alone unless
	// a pattern names them exactly.
	protection *protection

	// compiled is the spec's patterns and selector, compiled once per
	// watcher generation.
	*compiled
}

// jobWatcher compiles a JobWatcher, once per generation.
func (c *CompiledSpecs) jobWatcher(w *deckhandbatchv1.JobWatcher) *compiledWatcher {
	p := &compiledWatcher{watcher: w, spec: &w.Spec.JobPolicy}
	p.compiled = c.get(w, func() *compiled { return compile(p.spec, nil, nil) })
	return p
}

// clusterJobWatcher compiles a ClusterJobWatcher under prot, once per
// generation.
func (c *CompiledSpecs) clusterJobWatcher(w *deckhandbatchv1.ClusterJobWatcher, prot *protection) *compiledWatcher {
	p := &compiledWatcher{watcher: w, cluster: true, spec: &w.Spec.JobPolicy, protection: prot}
	p.compiled = c.get(w, func() *compiled {
		return compile(p.spec, w.Spec.NamespacePatterns, w.Spec.ExcludeNamespacePatterns)
	})
	return p
}

// watcherOf compiles a JobWatcher or ClusterJobWatcher, a cluster one under
// prot; nil for anything else.
func (c *CompiledSpecs) watcherOf(obj client.Object, prot *protection) *compiledWatcher {
	switch w := obj.(type) {
	case *deckhandbatchv1.JobWatcher:
		return c.jobWatcher(w)
	case *deckhandbatchv1.ClusterJobWatcher:
		return c.clusterJobWatcher(w, prot)
	}
	return nil
}

// compile compiles a watcher's patterns and selector, with the webhook's own
// function and bounds: with webhooks off, a pattern the webhook would refuse
// makes the watcher invalid (its Ready condition names the field) instead
// of costing the manager what it would compile to.
func compile(spec *deckhandbatchv1.JobPolicy, namespaces, excludeNamespaces []string) *compiled {
	c := &compiled{selector: labels.Everything()}
	res, perrs := jobwatcherpolicy.CompilePatterns(jobwatcherpolicy.WatcherPatterns(spec, namespaces, excludeNamespaces)...)
	c.names, c.excludeNames, c.namespaces, c.excludeNamespaces = res[0], res[1], res[2], res[3]
	c.literalNamespaces = literals(namespaces)
	errs := make([]error, 0, len(perrs)+1)
	for _, e := range perrs {
		errs = append(errs, e)
	}
	if spec.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(spec.Selector)
		if err != nil {
			errs = append(errs, fmt.Errorf("spec.selector: %w", err))
		} else {
			c.selector = sel
		}
	}
	c.err = errors.Join(errs...)
	return c
}

// compiled is what a watcher's spec compiles to; it is shared by every
// policy of one watcher generation, and never changed.
type compiled struct {
	names, excludeNames           []*regexp.Regexp
	namespaces, excludeNamespaces []*regexp.Regexp
	// literalNamespaces are the namespaces a namespace pattern names
	// exactly: the only protected namespaces the watcher reaches.
	literalNamespaces map[string]bool
	selector          labels.Selector
	// err says why the spec cannot be used; such a policy matches nothing.
	err error
}

// CompiledSpecs holds the compiled spec of each watcher for the latest
// generation seen, so that a watcher is compiled once per generation, not on
// every Job event: one entry per watcher, dropped when its status controller
// finds it gone. The reconcilers of one manager share one (Setup builds
// it); a nil CompiledSpecs compiles every time.
type CompiledSpecs struct {
	mu      sync.Mutex
	entries map[compileKey]compileEntry
	// compilations counts the compilations done, for tests.
	compilations int
}

type compileKey struct {
	cluster bool
	name    types.NamespacedName
}

type compileEntry struct {
	uid        types.UID
	generation int64
	compiled   *compiled
}

// NewCompiledSpecs returns an empty CompiledSpecs.
func NewCompiledSpecs() *CompiledSpecs {
	return &CompiledSpecs{entries: map[compileKey]compileEntry{}}
}

// get returns the compiled spec of w's generation, compiling it with build
// when it is not held. An object the apiserver never stored (no UID or
// generation), or a nil c, compiles every time.
func (c *CompiledSpecs) get(w client.Object, build func() *compiled) *compiled {
	if c == nil {
		return build()
	}
	_, cluster := w.(*deckhandbatchv1.ClusterJobWatcher)
	key := compileKey{cluster: cluster, name: client.ObjectKeyFromObject(w)}
	uid, gen := w.GetUID(), w.GetGeneration()
	stored := uid != "" && gen > 0
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if stored && ok && e.uid == uid && e.generation == gen {
		return e.compiled
	}
	out := build()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.compilations++
	// A stale read (an older generation) does not replace a newer one.
	if e, ok := c.entries[key]; stored && (!ok || e.uid != uid || e.generation < gen) {
		c.entries[key] = compileEntry{uid: uid, generation: gen, compiled: out}
	}
	return out
}

// forget drops what is held for the watcher of that kind and name.
func (c *CompiledSpecs) forget(cluster bool, name types.NamespacedName) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, compileKey{cluster: cluster, name: name})
}

// retain drops every entry but those keep says to keep.
func (c *CompiledSpecs) retain(keep func(compileKey) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	maps.DeleteFunc(c.entries, func(k compileKey, _ compileEntry) bool { return !keep(k) })
}

// reaches reports whether the watcher may act in namespace ns: a JobWatcher
// only in its own, a ClusterJobWatcher where its patterns say, and in a
// protected namespace only when a pattern names it exactly.
func (p *compiledWatcher) reaches(ns string) bool {
	if p.err != nil {
		return false
	}
	if !p.cluster {
		return ns == p.watcher.GetNamespace()
	}
	if !p.literalNamespaces[ns] && p.protection.protects(ns) {
		return false
	}
	return matchesAny(p.namespaces, ns, true) && !matchesAny(p.excludeNamespaces, ns, false)
}

// literals returns the names that patterns (already compiled, so valid and
// bounded) match as plain, case-sensitive literals: "kube-system" or
// "kube\-system", not "kube-.*" nor "(?i)kube-system".
func literals(patterns []string) map[string]bool {
	var out map[string]bool
	for _, pat := range patterns {
		re, err := syntax.Parse(pat, syntax.Perl)
		if err != nil || re.Op != syntax.OpLiteral || re.Flags&syntax.FoldCase != 0 {
			continue
		}
		if out == nil {
			out = map[string]bool{}
		}
		out[string(re.Rune)] = true
	}
	return out
}

// matches reports whether the watcher selects the Job.
func (p *compiledWatcher) matches(job *batchv1.Job) bool {
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
func (p *compiledWatcher) ttl(o outcome) (time.Duration, bool) {
	s := p.spec.TTLSecondsAfterSucceeded
	if o == outcomeFailed {
		s = p.spec.TTLSecondsAfterFailed
	}
	if s == nil {
		return 0, false
	}
	return time.Duration(*s) * time.Second, true
}

func (p *compiledWatcher) propagation() metav1.DeletionPropagation {
	if p.spec.PropagationPolicy == nil {
		return metav1.DeletePropagationBackground
	}
	return *p.spec.PropagationPolicy
}

// key names the watcher in logs, Events, metrics and status lists.
func (p *compiledWatcher) key() watcherKey {
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
	// verdictNoFinishTime: the Job finished but its condition carries no
	// time (lastTransitionTime unset, as a controller named in
	// spec.managedBy may write it); like Kubernetes' TTL controller, which
	// cannot tell when such a Job expires, Deckhand keeps it.
	verdictNoFinishTime verdict = "NoFinishTime"
	// verdictUnwatched: no watcher reaches the Job.
	verdictUnwatched verdict = "Unwatched"
	// verdictNoTTL: watchers match but none has a TTL for its outcome.
	verdictNoTTL verdict = "NoTTL"
	// verdictInHistory: the governing watcher keeps the Job as one of its
	// newest (history limit, no TTL for the outcome).
	verdictInHistory verdict = "InHistory"
	// verdictExpires: the Job goes at decision.Expiry, by decision.Governor.
	verdictExpires verdict = "Expires"
)

// decision is what happens to one Job.
type decision struct {
	Verdict verdict
	Outcome outcome
	// Governor is the watcher whose rules apply (its dry run, suspension and
	// propagation policy, and who is credited with the deletion).
	Governor *compiledWatcher
	TTL      time.Duration
	Expiry   time.Time
	// BeyondHistory: the Job goes at once because it is beyond the
	// governor's history limit.
	BeyondHistory bool
}

// due reports whether the Job should go now.
func (d decision) due(now time.Time) bool {
	return d.Verdict == verdictExpires && !now.Before(d.Expiry)
}

// decide applies the precedence: the Job's own ttlSecondsAfterFinished (left
// to Kubernetes) > its batch.deckhand.dev/keep and batch.deckhand.dev/ttl
// annotations > the JobWatchers of its namespace > ClusterJobWatchers; within
// a level the longest TTL wins, so no Job goes sooner than any matching
// policy allows. A watcher beyond whose history limit the Job is (h) allows
// it to go at once; a watcher with a limit and no TTL keeps the Jobs within
// it. The ttl annotation overrides both, as it overrides TTLs. Annotations only apply to Jobs some watcher reaches: a Job
// no watcher matches is never Deckhand's to delete. watchers may hold
// watchers of any namespace; the ones that do not match the Job are skipped.
func decide(job *batchv1.Job, watchers []*compiledWatcher, h history) decision {
	o, at, ok := finished(job)
	switch {
	case job.Spec.TTLSecondsAfterFinished != nil:
		return decision{Verdict: verdictOwnTTL, Outcome: o}
	case !ok:
		return decision{Verdict: verdictRunning}
	case at.IsZero():
		return decision{Verdict: verdictNoFinishTime, Outcome: o}
	case job.Annotations[deckhandbatchv1.KeepAnnotation] == "true":
		return decision{Verdict: verdictKeep, Outcome: o}
	}

	var namespaced, cluster []*compiledWatcher
	for _, p := range watchers {
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
	beyond := func(p *compiledWatcher) bool { return h.beyond(p, job) }
	var forever bool
	if g, a, ok := longest(namespaced, o, beyond); ok {
		d.Governor, d.TTL, d.BeyondHistory, forever = g, a.ttl, a.beyond, a.forever
	} else if g, a, ok := longest(cluster, o, beyond); ok {
		d.Governor, d.TTL, d.BeyondHistory, forever = g, a.ttl, a.beyond, a.forever
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
		d.TTL, d.BeyondHistory, forever = ttl, false, false
	}
	switch {
	case d.Governor == nil:
		return decision{Verdict: verdictNoTTL, Outcome: o}
	case forever:
		return decision{Verdict: verdictInHistory, Outcome: o, Governor: d.Governor}
	}
	d.Expiry = at.Add(d.TTL)
	return d
}

// allowance is how long one watcher lets a finished Job stay.
type allowance struct {
	ttl time.Duration
	// beyond: the Job is beyond the watcher's history limit, so it may go
	// at once.
	beyond bool
	// forever: the watcher has a history limit but no TTL for the outcome,
	// and the Job is within the limit.
	forever bool
}

// longer reports whether a lets a Job stay longer than b.
func (a allowance) longer(b allowance) bool {
	return (a.forever && !b.forever) || (!b.forever && a.ttl > b.ttl)
}

// allows is how long p lets a Job with outcome o stay (beyond says whether
// it is beyond p's history limit); false when p has no say over o.
func (p *compiledWatcher) allows(o outcome, beyond bool) (allowance, bool) {
	ttl, hasTTL := p.ttl(o)
	_, hasLimit := p.historyLimit(o)
	switch {
	case hasLimit && beyond:
		return allowance{beyond: true}, true
	case hasTTL:
		return allowance{ttl: ttl}, true
	case hasLimit:
		return allowance{forever: true}, true
	}
	return allowance{}, false
}

// longest returns the policy among ps (sorted) that lets a Job with outcome
// o stay longest, and how long: no policy lets it go sooner than any other
// with a say allows. A history limit shortens only its own watcher's
// allowance. Ties go to the first, so every reader picks the same governor.
func longest(ps []*compiledWatcher, o outcome, beyond func(*compiledWatcher) bool) (*compiledWatcher, allowance, bool) {
	var best *compiledWatcher
	var bestA allowance
	for _, p := range ps {
		a, ok := p.allows(o, beyond(p))
		if !ok {
			continue
		}
		if best == nil || a.longer(bestA) {
			best, bestA = p, a
		}
	}
	return best, bestA, best != nil
}

func comparePolicies(a, b *compiledWatcher) int {
	return cmp.Or(
		cmp.Compare(a.watcher.GetNamespace(), b.watcher.GetNamespace()),
		cmp.Compare(a.watcher.GetName(), b.watcher.GetName()))
}
