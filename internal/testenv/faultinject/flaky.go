package faultinject

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// expired is the apiserver's answer to a watch from a resourceVersion it no
// longer holds ("too old resource version").
const expired = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version (fault injection)","reason":"Expired","code":410}`

// FlakyWatches returns a copy of cfg whose watches break: every watch that
// resumes from a resourceVersion has its stream closed after cut, as when a
// connection drops mid-stream (events in flight are lost; the informer
// watches again from the last one it saw), and every other such watch is
// refused as "too old resource version", which makes the informer list
// everything again (a relist). The first list and watch of an informer are
// left alone, so that the manager's caches sync.
func FlakyWatches(cfg *rest.Config, cut time.Duration) *rest.Config {
	var n atomic.Int64
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			q := req.URL.Query()
			if !isWatch(req) || q.Get("resourceVersion") == "" || q.Has("sendInitialEvents") {
				return rt.RoundTrip(req)
			}
			if n.Add(1)%2 == 0 {
				return &http.Response{StatusCode: http.StatusGone, Status: "410 Gone", Proto: req.Proto, ProtoMajor: req.ProtoMajor, ProtoMinor: req.ProtoMinor,
					Header: http.Header{"Content-Type": []string{"application/json"}}, Body: io.NopCloser(bytes.NewBufferString(expired)), Request: req}, nil
			}
			resp, err := rt.RoundTrip(req)
			if err != nil {
				return resp, err
			}
			resp.Body = cutAfter(resp.Body, cut)
			return resp, nil
		})
	})
	return out
}

// cutAfter closes body after d: reads then end as if the connection broke.
func cutAfter(body io.ReadCloser, d time.Duration) io.ReadCloser {
	c := &cutBody{ReadCloser: body}
	c.timer = time.AfterFunc(d, func() { _ = c.Close() })
	return c
}

type cutBody struct {
	io.ReadCloser
	timer *time.Timer
	once  sync.Once
}

func (c *cutBody) Close() error {
	var err error
	c.once.Do(func() {
		c.timer.Stop()
		err = c.ReadCloser.Close()
	})
	return err
}
