package incident

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// notFoundReader answers every read with NotFound: the captures below need
// no Events and no node, only the log reads they count.
type notFoundReader struct{}

func (notFoundReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return apierrors.NewNotFound(schema.GroupResource{}, "")
}

func (notFoundReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return apierrors.NewNotFound(schema.GroupResource{}, "")
}

// TestACaptureWaitsForAnUnansweredNodeOnce: when a node's kubelet does not
// answer a log read (down, partitioned, or simulated), the next captures of
// its pods read no log for a while, saying why, instead of each waiting out
// the timeout; a node that answers, even with a refusal, is read every time,
// and so are other nodes. Without the pause, every capture on the silent
// node waits logsTimeout and the recorder falls behind every failure of the
// cluster (the bench's crash loop on 100 kwok nodes counted 214 of 2,000 failures).
func TestACaptureWaitsForAnUnansweredNodeOnce(t *testing.T) {
	var calls atomic.Int32
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	logs := func(ctx context.Context, _, pod, _ string, _ bool, _ int) (string, bool, error) {
		calls.Add(1)
		switch {
		case strings.HasPrefix(pod, "silent"):
			<-ctx.Done()
			return "", false, ctx.Err()
		case strings.HasPrefix(pod, "refusing"):
			return "", false, apierrors.NewBadRequest("previous terminated container \"app\" in pod not found")
		}
		return "the log\n", false, nil
	}
	r := NewIncidentReconciler(nil, notFoundReader{}, nil, logs, 0, nil)
	r.Now = func() time.Time { return now }
	capture := func(pod, node string) (logsRead, time.Duration) {
		j := logJob{pod: client.ObjectKey{Namespace: "ns", Name: pod}, node: node, container: "app", limit: 4096}
		start := time.Now()
		c := r.readJobLogs(context.Background(), j)
		return c, time.Since(start)
	}

	c, took := capture("silent-1", "down")
	if took < logsTimeout || c.note == "" {
		t.Fatalf("the first capture on the silent node: took %s, log error %q; want the timeout and its error", took, c.note)
	}
	c, took = capture("silent-2", "down")
	if took >= logsTimeout/2 || !strings.Contains(c.note, "kubelet of node down did not answer") {
		t.Fatalf("the second capture on the silent node took %s with log error %q; want no wait and a note naming the node", took, c.note)
	}
	if got := calls.Load(); got != 1 {
		t.Fatalf("log reads from the silent node: %d, want 1", got)
	}
	if c, _ = capture("healthy-1", "up"); c.tail != "the log\n" {
		t.Fatalf("a pod on another node: log %q, error %q; want its log", c.tail, c.note)
	}
	for range 2 {
		capture("refusing-1", "answers")
	}
	if got := calls.Load(); got != 4 {
		t.Fatalf("log reads: %d, want 4 (a kubelet that refuses has answered: it is asked again)", got)
	}

	// Once the pause is over the silent node is asked again; silent again,
	// it is paused twice as long, and an answer ends its pauses.
	now = now.Add(unansweredPause)
	capture("silent-3", "down")
	if got := calls.Load(); got != 5 {
		t.Fatalf("log reads after the pause: %d, want 5", got)
	}
	now = now.Add(unansweredPause)
	capture("silent-4", "down")
	if got := calls.Load(); got != 5 {
		t.Fatalf("log reads %s after the second silence: %d, want 5 (the pause doubled)", unansweredPause, got)
	}
	now = now.Add(unansweredPause)
	capture("healthy-2", "down") // the node answers again
	capture("silent-5", "down")
	if got := calls.Load(); got != 7 {
		t.Fatalf("log reads after the node answered: %d, want 7", got)
	}
}

// TestANodeSilentToOneNamespaceStillServesAnother: a tenant's log reads
// that time out on a node (its pods' logs slow to serve, or the node down)
// pause that tenant's reads on the node, not another tenant's: the other's
// pods on the same node, whose reads are answered, still get their logs.
// With the pause per node, one namespace's hanging reads made every other
// namespace's records on the node say "not read".
func TestANodeSilentToOneNamespaceStillServesAnother(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	logs := func(ctx context.Context, ns, _, _ string, _ bool, _ int) (string, bool, error) {
		if ns == "noisy" {
			<-ctx.Done()
			return "", false, ctx.Err()
		}
		return "the log\n", false, nil
	}
	r := NewIncidentReconciler(nil, notFoundReader{}, nil, logs, 0, nil)
	r.Now = func() time.Time { return now }
	read := func(ns string) logsRead {
		return r.readJobLogs(context.Background(), logJob{pod: client.ObjectKey{Namespace: ns, Name: "web"}, node: "shared", container: "app", limit: 4096})
	}
	if c := read("noisy"); c.tail != "" || c.note == "" {
		t.Fatalf("the noisy namespace's read: log %q, error %q; want its timeout", c.tail, c.note)
	}
	if c := read("noisy"); !strings.Contains(c.note, "kubelet of node shared did not answer") {
		t.Fatalf("the noisy namespace's next read: error %q; want it paused", c.note)
	}
	if c := read("quiet"); c.tail != "the log\n" {
		t.Fatalf("the quiet namespace's read on the same node: log %q, error %q; want its log", c.tail, c.note)
	}
}

// TestTheLogQueueIsBoundedAndFair: no more log reads of a namespace wait
// than its share, and no more in all than the queue holds, but for a few
// places each namespace gets even then, so that namespaces over their share
// never leave another none; a read done (or its record not written) frees
// its place; the readers take the namespaces in turn, each namespace's jobs
// in order, and no namespace's jobs hold more than their part of the
// readers at once.
func TestTheLogQueueIsBoundedAndFair(t *testing.T) {
	q := newLogQueue(6, 3, 2)
	for i, want := range []queueRefusal{refusedNone, refusedNone, refusedNone, refusedNamespace} {
		if got := q.reserve("a"); got != want {
			t.Fatalf("reservation %d of namespace a: %v, want %v (a share of three)", i+1, got, want)
		}
	}
	for range 3 {
		if got := q.reserve("b"); got != refusedNone {
			t.Fatalf("namespace b refused with %v while a holds only its share", got)
		}
	}
	for i := range minShare {
		if got := q.reserve(fmt.Sprint("c", i/2)); got != refusedNone {
			t.Fatalf("namespace c%d refused with %v below its minimum share", i/2, got)
		}
	}
	for _, job := range []struct{ ns, c string }{{"a", "a1"}, {"a", "a2"}, {"a", "a3"}, {"b", "b1"}, {"c0", "c1"}} {
		q.submit(logJob{pod: types.NamespacedName{Namespace: job.ns}, container: job.c})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, want := range []string{"a1", "b1", "c1", "a2"} {
		if j, _, ok := q.next(ctx); !ok || j.container != want {
			t.Fatalf("next: %q, %v; want %q", j.container, ok, want)
		}
	}
	short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancelShort()
	if j, _, ok := q.next(short); ok {
		t.Fatalf("next: %q while namespace a's reads hold two readers, its most", j.container)
	}
	if got := q.reserve("a"); got != refusedNamespace {
		t.Fatalf("a place is free before a read of its namespace is done: %v", got)
	}
	q.done(logJob{pod: types.NamespacedName{Namespace: "a"}})
	if j, _, ok := q.next(ctx); !ok || j.container != "a3" {
		t.Fatalf("next after a read of namespace a was done: %q, %v; want a3", j.container, ok)
	}
	if got := q.reserve("a"); got != refusedNone {
		t.Fatalf("no place after a read was done: %v", got)
	}
	if _, _, ok := q.next(short); ok {
		t.Fatal("a job from an empty queue")
	}
}

// TestARemovedLogIsNoLog: what the kubelet streams for a container whose
// log it removed (a pod it evicted) goes to logError, not into logTail; a
// program printing the words amid its output keeps its log.
func TestARemovedLogIsNoLog(t *testing.T) {
	gone := `failed to try resolving symlinks in path "/var/log/pods/ns_hog_uid/main/0.log": lstat /var/log/pods/ns_hog_uid: no such file or directory`
	// The other form, seen on the real node.
	unable := "unable to retrieve container logs for containerd://bae5989befa6d4219b8df46fc474029e3d97bc710b68e5e3553bd893636c4d05"
	for out, wantLog := range map[string]bool{gone: false, gone + "\n": false, unable: false, "filling\n" + gone + "\n": true, "filled\n": true} {
		r := NewIncidentReconciler(nil, notFoundReader{}, nil, func(context.Context, string, string, string, bool, int) (string, bool, error) {
			return out, false, nil
		}, 0, nil)
		got := r.readJobLogs(context.Background(), logJob{pod: client.ObjectKey{Namespace: "ns", Name: "hog"}, node: "n", container: "main", limit: 4096})
		if wantLog && (got.tail != out || got.note != "") || !wantLog && (got.tail != "" || !strings.Contains(got.note, "the kubelet has removed the container's log")) {
			t.Errorf("the kubelet streamed %q: log %q, note %q", out, got.tail, got.note)
		}
	}
	// The third form, an error seen on the real node for an evicted pod.
	r := NewIncidentReconciler(nil, notFoundReader{}, nil, func(context.Context, string, string, string, bool, int) (string, bool, error) {
		return "", false, errors.New(`container "main" in pod "hog" is terminated`)
	}, 0, nil)
	if got := r.readJobLogs(context.Background(), logJob{pod: client.ObjectKey{Namespace: "ns", Name: "hog"}, node: "n", container: "main", limit: 4096}); !strings.Contains(got.note, "the kubelet has removed the container's log") {
		t.Errorf("the apiserver answered that the container is terminated: note %q", got.note)
	}
}
