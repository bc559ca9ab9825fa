package jobwatcher

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
)

// gatedReader answers Gets of a watcher from the fake API server; the first
// Get waits for release. Like the API server's client, a Get fails once its
// context is done.
type gatedReader struct {
	client.Reader
	gets    atomic.Int32
	entered chan struct{}
	release chan struct{}
}

func (r *gatedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if r.gets.Add(1) == 1 {
		close(r.entered)
		<-r.release
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

// Deletions that share a read of their watcher do not share the context of
// the one that asked first: while a read is under way, reconcile b asks and
// starts the next one, c joins it; b's reconcile ends (its deadline) before
// that read starts. c still gets the watcher, and b alone gets its error.
func TestASharedWatcherReadOutlivesTheReconcileThatStartedIt(t *testing.T) {
	gov := jw("ns", "w", nil, nil)
	scheme := runtime.NewScheme()
	_ = deckhandbatchv1.AddToScheme(scheme)
	apiReader := &gatedReader{Reader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(gov.watcher).Build(),
		entered: make(chan struct{}), release: make(chan struct{})}
	var reads watcherReads
	bg := context.Background()

	aDone := make(chan error, 1)
	go func() {
		_, err := reads.read(bg, gov, apiReader)
		aDone <- err
	}()
	<-apiReader.entered // a's read is under way

	bCtx, bEnds := context.WithCancel(bg)
	bDone, cDone := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := reads.read(bCtx, gov, apiReader)
		bDone <- err
	}()
	waitFor(t, func() bool { reads.mu.Lock(); defer reads.mu.Unlock(); return reads.queues[queueKey(gov)].next != nil })
	go func() {
		_, err := reads.read(bg, gov, apiReader)
		cDone <- err
	}()
	time.Sleep(50 * time.Millisecond) // c joins b's read
	bEnds()
	close(apiReader.release)
	if err := <-bDone; err == nil {
		t.Error("b's reconcile ended, yet its wait returned the watcher")
	}
	if err := <-aDone; err != nil {
		t.Fatalf("a: %v", err)
	}
	if err := <-cDone; err != nil {
		t.Fatalf("c, which joined the read b started, failed with b's context: %v", err)
	}
	if n := apiReader.gets.Load(); n != 2 {
		t.Errorf("%d reads of the watcher, want 2 (a's, and the one b and c share)", n)
	}
}

// queueKey is the key reads of gov are queued under.
func queueKey(gov *compiledWatcher) watcherKey {
	key := gov.key()
	key.UID = ""
	return key
}

// waitFor polls cond until it holds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition never held")
		}
	}
}
