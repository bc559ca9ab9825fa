package podbugger

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	r := NewIncidentReconciler(nil, notFoundReader{}, nil, logs)
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

// TestTheLogQueueIsBounded: no more log reads wait than the queue holds, a
// read done (or its record not written) frees its slot, and the readers
// take the jobs in order.
func TestTheLogQueueIsBounded(t *testing.T) {
	q := newLogQueue(2)
	for i, want := range []bool{true, true, false} {
		if got := q.reserve(); got != want {
			t.Fatalf("reservation %d: %v, want %v (two slots)", i+1, got, want)
		}
	}
	q.submit(logJob{container: "a"})
	q.submit(logJob{container: "b"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, want := range []string{"a", "b"} {
		if j, ok := q.next(ctx); !ok || j.container != want {
			t.Fatalf("next: %q, %v; want %q", j.container, ok, want)
		}
	}
	if q.reserve() {
		t.Fatal("a slot is free before its read is done")
	}
	q.release()
	if !q.reserve() {
		t.Fatal("no slot after a read was done")
	}
	if _, ok := q.next(ctx); ok {
		t.Fatal("a job from an empty queue")
	}
}

// TestARemovedLogIsNoLog: what the kubelet streams for a container whose
// log it removed (a pod it evicted) goes to logError, not into logTail; a
// program printing the words amid its output keeps its log.
func TestARemovedLogIsNoLog(t *testing.T) {
	gone := `failed to try resolving symlinks in path "/var/log/pods/ns_hog_uid/main/0.log": lstat /var/log/pods/ns_hog_uid: no such file or directory`
	for out, wantLog := range map[string]bool{gone: false, gone + "\n": false, "filling\n" + gone + "\n": true, "filled\n": true} {
		r := NewIncidentReconciler(nil, notFoundReader{}, nil, func(context.Context, string, string, string, bool, int) (string, bool, error) {
			return out, false, nil
		})
		got := r.readJobLogs(context.Background(), logJob{pod: client.ObjectKey{Namespace: "ns", Name: "hog"}, node: "n", container: "main", limit: 4096})
		if wantLog && (got.tail != out || got.note != "") || !wantLog && (got.tail != "" || !strings.Contains(got.note, "the kubelet has removed the container's log")) {
			t.Errorf("the kubelet streamed %q: log %q, note %q", out, got.tail, got.note)
		}
	}
}
