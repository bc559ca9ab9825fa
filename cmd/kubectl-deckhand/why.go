package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	jobwatchercontroller "github.com/deckhand-dev/deckhand/internal/controller/jobwatcher"
)

func whyCommand() command {
	return command{run: func(x *cli, args []string) error {
		if len(args) != 2 || args[0] != "job" {
			return fmt.Errorf("%w: why job NAME", errUsage)
		}
		return whyJob(context.Background(), x, args[1])
	}}
}

// whyJob says what Deckhand decides for a Job and why: the watchers that
// reach it, the one that decides, its TTL or history limit, when the Job
// goes, and whether a breaker holds deletions.
func whyJob(ctx context.Context, x *cli, name string) error {
	job := &batchv1.Job{}
	if err := x.c.Get(ctx, client.ObjectKey{Namespace: x.namespace, Name: name}, job); err != nil {
		return fmt.Errorf("reading Job %s/%s: %w", x.namespace, name, err)
	}
	var watchers []client.Object
	local := &deckhandbatchv1.JobWatcherList{}
	if err := x.c.List(ctx, local, client.InNamespace(job.Namespace)); err != nil {
		return fmt.Errorf("listing JobWatchers of %s: %w", job.Namespace, err)
	}
	for i := range local.Items {
		watchers = append(watchers, &local.Items[i])
	}
	cluster := &deckhandbatchv1.ClusterJobWatcherList{}
	if err := x.c.List(ctx, cluster); err != nil {
		return fmt.Errorf("listing ClusterJobWatchers: %w", err)
	}
	for i := range cluster.Items {
		watchers = append(watchers, &cluster.Items[i])
	}
	jobs, err := jobsOf(ctx, x.c, job.Namespace)
	if err != nil {
		return err
	}
	// The manager's --jobwatcher-protected-namespaces is not known here:
	// the default list, and the namespaces labelled protected.
	e := jobwatchercontroller.Explain(job, watchers, jobs, nil, x.c)
	p := func(format string, a ...any) { _, _ = fmt.Fprintf(x.out, format+"\n", a...) }
	p("Job %s/%s: %s", job.Namespace, job.Name, orDash(e.Outcome, "not finished"))
	if len(e.Matching) == 0 {
		p("Watchers: none reaches it")
	} else {
		p("Watchers: %s", strings.Join(e.Matching, ", "))
	}
	if e.Governor != "" {
		p("Decides: %s", e.Governor)
	}
	p("Verdict: %s", verdictText(e, x.now))
	if held := breakerOf(e.Governor, watchers); held != "" {
		p("Breaker: %s", held)
	}
	return nil
}

// jobsOf lists the Jobs of a namespace in pages, for history limits.
func jobsOf(ctx context.Context, c client.Client, namespace string) ([]batchv1.Job, error) {
	var jobs []batchv1.Job
	list := &batchv1.JobList{}
	opts := []client.ListOption{client.InNamespace(namespace), client.Limit(500)}
	for {
		if err := c.List(ctx, list, opts...); err != nil {
			return nil, fmt.Errorf("listing the Jobs of %s: %w", namespace, err)
		}
		jobs = append(jobs, list.Items...)
		if list.Continue == "" {
			return jobs, nil
		}
		opts = []client.ListOption{client.InNamespace(namespace), client.Limit(500), client.Continue(list.Continue)}
	}
}

func verdictText(e jobwatchercontroller.Explanation, now time.Time) string {
	switch e.Verdict {
	case "Running":
		return "kept: the Job has not finished"
	case "OwnTTL":
		return "left to Kubernetes: the Job sets spec.ttlSecondsAfterFinished"
	case "Keep":
		return "kept for good: annotated " + deckhandbatchv1.KeepAnnotation + `: "true"`
	case "InvalidTTLAnnotation":
		return "kept: its " + deckhandbatchv1.TTLAnnotation + " annotation is not a duration"
	case "NoFinishTime":
		return "kept: its finish condition has no time, so no expiry can be told"
	case "Unwatched":
		return "kept: no JobWatcher of its namespace and no ClusterJobWatcher matches it"
	case "NoTTL":
		return "kept: the watchers that match it have no TTL for a " + strings.ToLower(e.Outcome) + " Job"
	case "InHistory":
		return "kept: one of the newest the deciding watcher's history limit keeps"
	case "Expires":
		if e.BeyondHistory {
			return "goes now: beyond the deciding watcher's history limit"
		}
		when := e.Expiry.UTC().Format(time.RFC3339)
		if now.Before(e.Expiry) {
			return fmt.Sprintf("goes at %s (in %s), %s after it finished", when, e.Expiry.Sub(now).Round(time.Second), e.TTL)
		}
		return fmt.Sprintf("due since %s (%s after it finished): it goes at the next pass", when, e.TTL)
	}
	return e.Verdict
}

// breakerOf reports the deciding watcher's DeletionsPaused condition when
// it is true.
func breakerOf(governor string, watchers []client.Object) string {
	for _, w := range watchers {
		key := watcherName(w)
		if key != governor {
			continue
		}
		if c := meta.FindStatusCondition(conditionsOf(w), deckhandbatchv1.ConditionDeletionsPaused); c != nil && c.Status == "True" {
			return fmt.Sprintf("%s holds its deletions (%s): %s", key, c.Reason, oneLine(c.Message, 200))
		}
	}
	return ""
}

func watcherName(w client.Object) string {
	switch w.(type) {
	case *deckhandbatchv1.ClusterJobWatcher:
		return "ClusterJobWatcher/" + w.GetName()
	default:
		return "JobWatcher/" + w.GetNamespace() + "/" + w.GetName()
	}
}

func orDash(s, empty string) string {
	if s == "" {
		return empty
	}
	return s
}

func conditionsOf(w client.Object) []metav1.Condition {
	switch w := w.(type) {
	case *deckhandbatchv1.JobWatcher:
		return w.Status.Conditions
	case *deckhandbatchv1.ClusterJobWatcher:
		return w.Status.Conditions
	}
	return nil
}
