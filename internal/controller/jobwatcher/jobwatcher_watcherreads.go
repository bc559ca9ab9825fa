package jobwatcher

import (
	"context"
	"errors"
	"sync"

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
// per round of workers, not per Job. The zero value is ready.
type watcherReads struct {
	mu     sync.Mutex
	queues map[watcherKey]*watcherReadQueue
}

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
// apiReader by a GET that starts after read is called.
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
	if r := q.next; r != nil {
		// It has not started: it starts after this Job was judged.
		w.mu.Unlock()
		select {
		case <-r.done:
			return r.live, r.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	r := &watcherRead{done: make(chan struct{})}
	q.next = r
	before := q.running
	w.mu.Unlock()
	if before != nil {
		// Not bounded by ctx: the Jobs that joined r wait for this caller
		// to start it. before is a GET bounded by its own caller's context.
		<-before.done
	}
	w.mu.Lock()
	q.running, q.next = r, nil
	w.mu.Unlock()

	r.live, r.err = w.get(ctx, gov, apiReader)
	w.mu.Lock()
	q.running = nil
	if q.next == nil {
		delete(w.queues, key)
	}
	w.mu.Unlock()
	close(r.done)
	return r.live, r.err
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
