package jobwatcher

import (
	"context"
	"errors"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// watcherReads coalesces the reads past the cache of the watchers that
// deletions rest on, without weakening them: a deletion rests on a read of
// its governing watcher that started after its Job was judged due, as if it
// had sent a GET of its own. A read already under way may have left before
// the watcher changed and the Job was judged, so no deletion shares it. One
// read of a watcher is under way at a time; the deletions that ask while it
// is (the workers draining a backlog of one watcher's Jobs) share the next
// one, which starts once it has ended: a backlog costs a GET of its watcher
// per round of workers, not per Job.
//
// A read runs in a goroutine of its own, under a context of its own (the
// first asker's values, not its deadline or cancellation, bounded by
// watcherReadTimeout), and each asker waits for it with its own context: a
// reconcile that ends (its deadline, the manager stopping) fails only
// itself, not the deletions that joined the same read. The zero value is
// ready.
type watcherReads struct {
	mu     sync.Mutex
	queues map[watcherKey]*watcherReadQueue
}

// watcherReadTimeout bounds one read of a watcher past the cache.
const watcherReadTimeout = 30 * time.Second

// watcherReadQueue is the reads of one watcher: the one under way, and the
// next, which has not started, that new askers join.
type watcherReadQueue struct {
	running, next *watcherRead
}

// watcherRead is one GET of a watcher; done is closed once live and err
// hold its answer.
type watcherRead struct {
	done chan struct{}
	live client.Object
	err  error
}

// read returns the governor gov as the API server holds it, read through
// apiReader by a GET that starts after read is called; ctx bounds only this
// caller's wait.
func (w *watcherReads) read(ctx context.Context, gov *compiledWatcher, apiReader client.Reader) (client.Object, error) {
	key := gov.key()
	key.UID = "" // a watcher replaced by another of its name is read by the same GET
	w.mu.Lock()
	if w.queues == nil {
		w.queues = map[watcherKey]*watcherReadQueue{}
	}
	q := w.queues[key]
	if q == nil {
		q = &watcherReadQueue{}
		w.queues[key] = q
	}
	r := q.next
	if r == nil {
		// None has started since this Job was judged: a new one, after the
		// one under way.
		r = &watcherRead{done: make(chan struct{})}
		q.next = r
		go w.run(context.WithoutCancel(ctx), key, q, r, q.running, gov, apiReader)
	}
	w.mu.Unlock()
	select {
	case <-r.done:
		return r.live, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// run reads r once before (the read under way when r was queued, nil for
// none) has ended.
func (w *watcherReads) run(ctx context.Context, key watcherKey, q *watcherReadQueue, r, before *watcherRead, gov *compiledWatcher, apiReader client.Reader) {
	if before != nil {
		<-before.done // bounded by its own watcherReadTimeout
	}
	w.mu.Lock()
	q.running, q.next = r, nil
	w.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, watcherReadTimeout)
	r.live, r.err = w.get(ctx, gov, apiReader)
	cancel()
	w.mu.Lock()
	q.running = nil
	if q.next == nil {
		delete(w.queues, key)
	}
	w.mu.Unlock()
	close(r.done)
}

// errNotAWatcher: a governor that is not a client.Object, which never
// happens.
var errNotAWatcher = errors.New("not a watcher")

// get reads gov's watcher past the cache, counted.
func (w *watcherReads) get(ctx context.Context, gov *compiledWatcher, apiReader client.Reader) (client.Object, error) {
	live, ok := gov.watcher.DeepCopyObject().(client.Object)
	if !ok {
		return nil, errNotAWatcher
	}
	jobAPIRequests.WithLabelValues(watcherResource(gov), "get").Inc()
	if err := apiReader.Get(ctx, client.ObjectKeyFromObject(gov.watcher), live); err != nil {
		return nil, err
	}
	return live, nil
}
