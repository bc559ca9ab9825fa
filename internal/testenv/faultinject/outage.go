package faultinject

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
)

// ErrUnreachable is what every request gets during an Outage, as when the
// apiserver cannot be reached.
var ErrUnreachable = errors.New("connect: connection refused (fault injection: apiserver unreachable)")

// Outage makes the apiserver unreachable for a manager, and reachable again:
// while it is on, every request of a config it wrapped fails, and every
// watch open when it began is cut. Only requests whose path contains one of
// paths, as whole path elements, are affected (all of them without paths):
// "/pods" is a pod's or a list of pods, not a PodSet's "/podsets".
type Outage struct {
	paths []string

	mu      sync.Mutex
	on      bool
	watches map[*watchBody]struct{}
}

// NewOutage returns an Outage, off, of the requests whose path contains one
// of paths (such as "/pods", or "/jobs") as whole elements, or of every
// request.
func NewOutage(paths ...string) *Outage {
	return &Outage{paths: paths, watches: map[*watchBody]struct{}{}}
}

// Config returns a copy of cfg whose requests go through o.
func (o *Outage) Config(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return RoundTripperFunc(func(req *http.Request) (*http.Response, error) { return o.roundTrip(rt, req) })
	})
	return out
}

// Begin makes the apiserver unreachable: open watches are cut, requests
// fail.
func (o *Outage) Begin() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.on = true
	for w := range o.watches {
		_ = w.Close()
	}
	clear(o.watches)
}

// End makes the apiserver reachable again.
func (o *Outage) End() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.on = false
}

func (o *Outage) affects(req *http.Request) bool {
	if len(o.paths) == 0 {
		return true
	}
	path := strings.TrimSuffix(req.URL.Path, "/") + "/"
	for _, p := range o.paths {
		if strings.Contains(path, strings.TrimSuffix(p, "/")+"/") {
			return true
		}
	}
	return false
}

func (o *Outage) roundTrip(rt http.RoundTripper, req *http.Request) (*http.Response, error) {
	if !o.affects(req) {
		return rt.RoundTrip(req)
	}
	o.mu.Lock()
	on := o.on
	o.mu.Unlock()
	if on {
		return nil, ErrUnreachable
	}
	resp, err := rt.RoundTrip(req)
	if err != nil || !isWatch(req) {
		return resp, err
	}
	w := &watchBody{ReadCloser: resp.Body, o: o}
	o.mu.Lock()
	if o.on {
		o.mu.Unlock()
		_ = resp.Body.Close()
		return nil, ErrUnreachable
	}
	o.watches[w] = struct{}{}
	o.mu.Unlock()
	resp.Body = w
	return resp, nil
}

// watchBody is an open watch's body, in the Outage's set until closed.
type watchBody struct {
	io.ReadCloser
	o    *Outage
	once sync.Once
}

// Close ends the watch; Begin calls it with o.mu held.
func (w *watchBody) Close() error {
	var err error
	w.once.Do(func() {
		err = w.ReadCloser.Close()
		go func() {
			w.o.mu.Lock()
			defer w.o.mu.Unlock()
			delete(w.o.watches, w)
		}()
	})
	return err
}
