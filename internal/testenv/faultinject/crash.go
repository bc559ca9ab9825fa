// Package faultinject holds the faults tests inject into a manager: a crash
// after its k-th write, watches that lag, break or are cut by an outage,
// reads that answer from a stale snapshot or are counted, and writes whose
// responses are lost. test/faults builds every scenario from them.
package faultinject

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// ErrCrashed is what a crashed manager's writes get: the process is dead,
// nothing it sends reaches the apiserver any more.
var ErrCrashed = errors.New("fault injection: the manager crashed")

// CrashPoint counts a manager's writes at its HTTP transport and, after the
// limit-th one went through, kills it: every later write is refused before
// it is sent, and Crashed is closed so that the test stops the manager
// (test/faults crashes a manager after each of its writes in turn).
//
// The transport, not a wrapped client.Client (manager.Options'
// NewClient), because it sees every write the process makes, through any
// client: the manager's client and its status writes, the clientsets a
// controller builds from mgr.GetConfig() (PodBugger's ephemeralcontainers
// subresource) and the Event recorder. A wrapped client would let those
// escape the crash, which no real crash does. It also needs no hook in
// production code: manager.New already takes the rest.Config.
//
// Events are let through but not counted: the recorder sends them from
// its own goroutine, so their place among the controller's writes is not
// reproducible, and a crash just after one is the same state as a crash
// just after the write before it. Writes already on the wire at the crash
// complete, as they would when a process dies.
type CrashPoint struct {
	// Only, when set, picks the writes that count: the crash comes after
	// the limit-th write it accepts.
	Only func(*http.Request) bool

	limit int // 0: never crash, only count

	mu      sync.Mutex
	writes  int
	last    time.Time
	dead    bool
	crashed chan struct{}
}

// NewCrashPoint returns a CrashPoint that crashes after limit writes, or
// with 0 only counts them.
func NewCrashPoint(limit int) *CrashPoint {
	return &CrashPoint{limit: limit, last: time.Now(), crashed: make(chan struct{})}
}

// Config returns a copy of cfg whose requests go through c, for
// StartManagerWithConfig.
func (c *CrashPoint) Config(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return RoundTripperFunc(func(req *http.Request) (*http.Response, error) { return c.roundTrip(rt, req) })
	})
	return out
}

func (c *CrashPoint) roundTrip(rt http.RoundTripper, req *http.Request) (*http.Response, error) {
	if !mutating(req) {
		return rt.RoundTrip(req)
	}
	c.mu.Lock()
	dead := c.dead
	c.mu.Unlock()
	if dead {
		return nil, ErrCrashed
	}
	resp, err := rt.RoundTrip(req)
	if err != nil || resp.StatusCode >= 300 || isEvent(req) || (c.Only != nil && !c.Only(req)) {
		return resp, err // refused writes changed nothing: not a crash point
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	c.last = time.Now()
	if c.writes == c.limit {
		c.dead = true
		close(c.crashed)
	}
	return resp, err
}

// Writes is how many writes went through so far.
func (c *CrashPoint) Writes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes
}

// Crashed is closed once the manager crashed.
func (c *CrashPoint) Crashed() <-chan struct{} { return c.crashed }

// QuietFor reports whether no write went through for d.
func (c *CrashPoint) QuietFor(d time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Since(c.last) >= d
}

func mutating(req *http.Request) bool {
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

func isEvent(req *http.Request) bool {
	return strings.HasSuffix(req.URL.Path, "/events") || strings.Contains(req.URL.Path, "/events/")
}

// RoundTripperFunc is a function that is an http.RoundTripper, as
// http.HandlerFunc is a handler: what a rest.Config's Wrap returns to watch,
// hold or refuse the requests of a client (here and in the tests of the
// packages that wrap their managers' and caches' transports).
type RoundTripperFunc func(*http.Request) (*http.Response, error)

// RoundTrip calls f(req).
func (f RoundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
