package incident

import (
	"context"
	"slices"
	"sync"
)

// The recorder's queues (log reads, Events) serve every namespace of the
// cluster, and a namespace's editor decides how many of its pods fail. With
// one queue in arrival order, a tenant's 500 crash-looping pods put 500 log
// reads ahead of another tenant's one failure, and took every free place:
// the other tenant's record said its log was "not read"; and its slow reads
// held every reader. A fairQueue keeps each namespace's work in its own
// line, served round-robin, bounds each line as well as the whole (a
// namespace over its share has its own newest work refused, never another
// namespace's) and lets no namespace hold more than a part of the workers
// at once, so that another namespace's work finds one free.

// fairQueue is a queue of work by namespace: each namespace's items in the
// order they came, the namespaces taken in turn. A place is reserved before
// an item is submitted, and freed (release) once the item is done or
// dropped. Its memory follows what waits: a namespace with nothing reserved
// holds nothing.
type fairQueue[T any] struct {
	mu sync.Mutex
	// max bounds the places reserved in all; perNamespace those of one
	// namespace. A namespace with fewer than minShare places gets one even
	// when max are taken, so that the namespaces over their share never
	// leave another none: the bound is then max plus minShare per
	// namespace, and namespaces are the cluster admin's, not a tenant's.
	max, perNamespace int
	// maxActive bounds the items of one namespace being worked on at once.
	maxActive int
	reserved  int
	lines     map[string]*line[T]
	// turn is the namespaces with items waiting, in the order they are
	// served: the first is served next, and goes to the end if it has more.
	turn  []string
	ready chan struct{}
}

// minShare is how many places a namespace gets even when the queue is full.
const minShare = 4

// line is one namespace's work: its places reserved, its items waiting and
// how many of them are being worked on.
type line[T any] struct {
	reserved, active int
	items            []T
}

func newFairQueue[T any](max, perNamespace, maxActive int) *fairQueue[T] {
	return &fairQueue[T]{max: max, perNamespace: perNamespace, maxActive: maxActive,
		lines: map[string]*line[T]{}, ready: make(chan struct{}, 1)}
}

// queueRefusal says why a place was not reserved; refusedNone when it was.
type queueRefusal int

const (
	refusedNone      queueRefusal = iota
	refusedNamespace              // the namespace has its share
	refusedTotal                  // every place is taken
)

// reserve takes a place for namespace ns if one is free to it.
func (q *fairQueue[T]) reserve(ns string) queueRefusal {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.lines[ns]
	if l == nil {
		l = &line[T]{}
		q.lines[ns] = l
	}
	switch {
	case l.reserved >= q.perNamespace:
		return refusedNamespace
	case q.reserved >= q.max && l.reserved >= minShare:
		return refusedTotal
	}
	l.reserved++
	q.reserved++
	return refusedNone
}

// release frees a place of ns: its item is done, or was never submitted.
func (q *fairQueue[T]) release(ns string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.lines[ns]
	if l == nil {
		return
	}
	l.reserved--
	q.reserved--
	if l.reserved == 0 && len(l.items) == 0 {
		delete(q.lines, ns)
	}
}

// submit queues item in the place reserved for it in ns.
func (q *fairQueue[T]) submit(ns string, item T) {
	q.mu.Lock()
	l := q.lines[ns]
	if l == nil { // submitted without a place: take one
		l = &line[T]{reserved: 1}
		q.lines[ns] = l
		q.reserved++
	}
	l.items = append(l.items, item)
	if len(l.items) == 1 {
		q.turn = append(q.turn, ns)
	}
	q.mu.Unlock()
	q.wake()
}

// push reserves a place in ns and queues item in it, unless refused.
func (q *fairQueue[T]) push(ns string, item T) queueRefusal {
	if why := q.reserve(ns); why != refusedNone {
		return why
	}
	q.submit(ns, item)
	return refusedNone
}

func (q *fairQueue[T]) wake() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// next waits for the next item, the oldest of the first namespace in turn
// with fewer than maxActive items being worked on, and its namespace; false
// when ctx ends first. The item keeps its place until finish.
func (q *fairQueue[T]) next(ctx context.Context) (T, string, bool) {
	for {
		if item, ns, ok := q.take(); ok {
			return item, ns, true
		}
		select {
		case <-ctx.Done():
			var zero T
			return zero, "", false
		case <-q.ready:
		}
	}
}

// take is next without the wait.
func (q *fairQueue[T]) take() (T, string, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var zero T
	i := slices.IndexFunc(q.turn, func(ns string) bool { return q.lines[ns].active < q.maxActive })
	if i < 0 {
		return zero, "", false
	}
	ns := q.turn[i]
	q.turn = slices.Delete(q.turn, i, i+1)
	l := q.lines[ns]
	item := l.items[0]
	l.items[0] = zero
	l.items = l.items[1:]
	l.active++
	if len(l.items) == 0 {
		l.items = nil // the array goes with the backlog
	} else {
		q.turn = append(q.turn, ns)
	}
	if len(q.turn) == 0 {
		q.turn = nil
	} else {
		q.wake() // another worker takes the next one
	}
	return item, ns, true
}

// finish frees the place of an item of ns that next handed out: its work
// is over.
func (q *fairQueue[T]) finish(ns string) {
	q.mu.Lock()
	if l := q.lines[ns]; l != nil {
		l.active--
	}
	q.mu.Unlock()
	q.release(ns)
	q.wake() // ns may have work that waited for this one
}

// waiting is how many items wait, in all.
func (q *fairQueue[T]) waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, l := range q.lines {
		n += len(l.items)
	}
	return n
}
