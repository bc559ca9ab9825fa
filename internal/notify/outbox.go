package notify

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// Outbox delivers notifications at least once: each is retried, with
// exponential backoff, until its receiver answers 2xx or it is older than
// MaxAge. Each namespace has its own queue, served in turn, so one
// namespace's storm does not delay another's notifications, and a
// namespace past its share loses its own oldest notification, never
// another's.
type Outbox struct {
	// Client sends (its Timeout bounds one attempt).
	Client *http.Client
	// MinBackoff and MaxBackoff bound the wait before a retry.
	MinBackoff, MaxBackoff time.Duration
	// MaxAge is how long a notification is retried.
	MaxAge time.Duration
	// PerNamespace bounds the notifications waiting in one namespace.
	PerNamespace int
	// Senders is how many attempts run at once.
	Senders int

	mu     sync.Mutex
	queues map[string][]*pending
	// turn lists the namespaces with something queued, in the order they
	// are served.
	turn []string
	wake chan struct{}
	// Delivered, Dropped and Expired count what became of notifications.
	delivered, dropped, expired int
}

type pending struct {
	ns string
	// then is told, once, whether the notification was delivered.
	then     func(delivered bool)
	t        Target
	m        Message
	attempts int
	first    time.Time
	next     time.Time
	sending  bool
}

// NewOutbox returns an Outbox with the defaults: 10 s an attempt, retries
// from 1 s to 5 minutes apart for an hour, 100 waiting per namespace, 4
// attempts at once.
func NewOutbox() *Outbox {
	return &Outbox{Client: &http.Client{Timeout: 10 * time.Second}, MinBackoff: time.Second, MaxBackoff: 5 * time.Minute,
		MaxAge: time.Hour, PerNamespace: 100, Senders: 4}
}

// Enqueue queues m for t on behalf of namespace ns; then (unless nil) is
// told, once, whether it was delivered: false when it expired undelivered
// or was dropped (its namespace past its share). It is called from the
// Outbox's own goroutines, and must not block.
func (o *Outbox) Enqueue(ns string, t Target, m Message, then func(delivered bool)) {
	var dropped *pending
	defer func() {
		if dropped != nil && dropped.then != nil {
			dropped.then(false)
		}
	}()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.queues == nil {
		o.queues, o.wake = map[string][]*pending{}, make(chan struct{}, 1)
	}
	q := o.queues[ns]
	if len(q) == 0 {
		o.turn = append(o.turn, ns)
	}
	if len(q) >= o.PerNamespace {
		// Its oldest not being sent (the head may be).
		for i, p := range q {
			if !p.sending {
				q = append(q[:i], q[i+1:]...)
				o.dropped++
				dropped = p
				break
			}
		}
	}
	now := time.Now()
	o.queues[ns] = append(q, &pending{ns: ns, t: t, m: m, then: then, first: now, next: now})
	o.poke()
}

func (o *Outbox) poke() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// Counts returns how many notifications were delivered, dropped (a
// namespace past its share) and expired (past MaxAge undelivered).
func (o *Outbox) Counts() (delivered, dropped, expired int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.delivered, o.dropped, o.expired
}

// Run delivers until ctx ends.
func (o *Outbox) Run(ctx context.Context) {
	o.mu.Lock()
	if o.queues == nil {
		o.queues, o.wake = map[string][]*pending{}, make(chan struct{}, 1)
	}
	o.mu.Unlock()
	slots := make(chan struct{}, max(o.Senders, 1))
	for {
		p, wait := o.nextDue(time.Now())
		if p == nil {
			timer := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-o.wake:
			case <-timer.C:
			}
			timer.Stop()
			continue
		}
		select {
		case <-ctx.Done():
			return
		case slots <- struct{}{}:
		}
		go func() {
			defer func() { <-slots }()
			o.done(p, Send(ctx, o.Client, p.t, p.m), time.Now())
		}()
	}
}

// nextDue takes the next notification due, serving the namespaces in turn,
// or says how long until one may be. A namespace's notifications go in
// order, one at a time: its head, once due and not being sent (so an
// opening is never overtaken by its summary, and a slow receiver holds one
// sender, not all).
func (o *Outbox) nextDue(now time.Time) (*pending, time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	wait := time.Minute
	for range len(o.turn) {
		ns := o.turn[0]
		o.turn = append(o.turn[1:], ns)
		q := o.queues[ns]
		if len(q) == 0 || q[0].sending {
			continue
		}
		if p := q[0]; !p.next.After(now) {
			p.sending = true
			return p, 0
		}
		wait = min(wait, q[0].next.Sub(now))
	}
	return nil, wait
}

// done records the outcome of one attempt, and tells p.then of a last one.
func (o *Outbox) done(p *pending, err error, now time.Time) {
	o.mu.Lock()
	p.sending = false
	p.attempts++
	switch {
	case err == nil:
		o.delivered++
	case now.Sub(p.first) >= o.MaxAge:
		o.expired++
	default:
		backoff := o.MinBackoff << min(p.attempts-1, 20)
		p.next = now.Add(min(backoff, o.MaxBackoff))
		o.poke()
		o.mu.Unlock()
		return
	}
	o.remove(p)
	o.poke() // the namespace's next may go
	o.mu.Unlock()
	if p.then != nil {
		p.then(err == nil)
	}
}

func (o *Outbox) remove(p *pending) {
	q := o.queues[p.ns]
	for i, x := range q {
		if x == p {
			q = append(q[:i], q[i+1:]...)
			break
		}
	}
	if len(q) > 0 {
		o.queues[p.ns] = q
		return
	}
	delete(o.queues, p.ns)
	for i, ns := range o.turn {
		if ns == p.ns {
			o.turn = append(o.turn[:i], o.turn[i+1:]...)
			break
		}
	}
}
