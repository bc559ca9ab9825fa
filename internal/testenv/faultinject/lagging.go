package faultinject

import (
	"io"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
)

// LaggingWatches returns a copy of cfg whose watches deliver every event
// delay late, in order: a manager built on it has a cache that lags the
// apiserver by delay, so it still shows an object the manager already
// deleted, and does not yet show one it created. Its reads and writes are
// not delayed. test/faults runs each scenario on such a cache.
func LaggingWatches(cfg *rest.Config, delay time.Duration) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err != nil || !isWatch(req) {
				return resp, err
			}
			resp.Body = lagging(resp.Body, delay)
			return resp, nil
		})
	})
	return out
}

// lagging passes what body yields on, each chunk delay after it arrived.
func lagging(body io.ReadCloser, delay time.Duration) io.ReadCloser {
	type chunk struct {
		data []byte
		at   time.Time
	}
	chunks := make(chan chunk, 4096)
	r, w := io.Pipe()
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, 32*1024)
			n, err := body.Read(buf)
			if n > 0 {
				chunks <- chunk{data: buf[:n], at: time.Now()}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		var failed error
		for c := range chunks { // drained to the end, so the reader never blocks
			if failed == nil {
				time.Sleep(time.Until(c.at.Add(delay)))
				_, failed = w.Write(c.data)
			}
		}
		_ = w.Close()
		_ = body.Close()
	}()
	return &laggingBody{PipeReader: r, body: body}
}

type laggingBody struct {
	*io.PipeReader
	body io.ReadCloser
}

// Close ends the watch: the apiserver's stream and the pipe.
func (b *laggingBody) Close() error {
	_ = b.body.Close()
	return b.PipeReader.Close()
}

// isWatch reports whether req opens a watch.
func isWatch(req *http.Request) bool { return req.URL.Query().Get("watch") == "true" }
