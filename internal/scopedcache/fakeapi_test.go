package scopedcache

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// fakeAPI is an apiserver of pods for the scoped cache's informers, served
// through the rest client's transport: lists (whole, of the latest
// version), watches from a resourceVersion (410 Expired when it is
// compacted away), watches cut, outages (every request refused) and slow
// lists. Every informer the cache starts reads it as it would a real
// apiserver, through controller-runtime's list-watch and pagedlist.Informers.
type fakeAPI struct {
	mu        sync.Mutex
	rv        uint64
	pods      map[string]map[string]*corev1.Pod // namespace → name
	log       []apiEvent
	compacted uint64 // a watch from before it is told 410
	down      bool
	refused   map[string]bool // namespaces whose own informers are refused
	listDelay time.Duration
	watches   map[*fakeWatch]struct{}
}

type apiEvent struct {
	rv  uint64
	typ string
	pod *corev1.Pod
}

func newFakeAPI() *fakeAPI {
	return &fakeAPI{rv: 1, pods: map[string]map[string]*corev1.Pod{}, watches: map[*fakeWatch]struct{}{}}
}

// write creates (or updates) namespace/name, or deletes it.
func (a *fakeAPI) write(namespace, name string, del bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.pods[namespace][name]
	if del && old == nil {
		return
	}
	a.rv++
	p := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, ResourceVersion: strconv.FormatUint(a.rv, 10)}}
	typ := "ADDED"
	switch {
	case del:
		typ = "DELETED"
		delete(a.pods[namespace], name)
	case old != nil:
		typ = "MODIFIED"
		p.UID = old.UID
		a.pods[namespace][name] = p
	default:
		p.UID = types.UID("uid-" + p.ResourceVersion)
		if a.pods[namespace] == nil {
			a.pods[namespace] = map[string]*corev1.Pod{}
		}
		a.pods[namespace][name] = p
	}
	if del {
		p.UID = old.UID
	}
	ev := apiEvent{rv: a.rv, typ: typ, pod: p}
	a.log = append(a.log, ev)
	for w := range a.watches {
		w.send(ev)
	}
}

// holds is what the apiserver holds in namespace: name → resourceVersion.
func (a *fakeAPI) holds(namespace string) map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]string{}
	for n, p := range a.pods[namespace] {
		out[n] = p.ResourceVersion
	}
	return out
}

// cutWatches ends every watch; compact also expires every version before
// now, so a watch resumed from one is told 410 and the informer lists again.
func (a *fakeAPI) cutWatches(compact bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if compact {
		a.compacted = a.rv
		a.log = nil
	}
	for w := range a.watches {
		w.end()
		delete(a.watches, w)
	}
}

// setDown starts or ends an outage: while down, every request is refused
// and every watch ends.
func (a *fakeAPI) setDown(down bool) {
	a.mu.Lock()
	a.down = down
	a.mu.Unlock()
	if down {
		a.cutWatches(false)
	}
}

// refuse refuses (or serves again) the requests of namespace's own
// informers, and ends their watches: an outage only they see.
func (a *fakeAPI) refuse(namespace string, refused bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.refused == nil {
		a.refused = map[string]bool{}
	}
	a.refused[namespace] = refused
	for w := range a.watches {
		if refused && w.namespace == namespace {
			w.end()
			delete(a.watches, w)
		}
	}
}

func (a *fakeAPI) setListDelay(d time.Duration) {
	a.mu.Lock()
	a.listDelay = d
	a.mu.Unlock()
}

func (a *fakeAPI) RoundTrip(req *http.Request) (*http.Response, error) {
	a.mu.Lock()
	down, delay := a.down, a.listDelay
	a.mu.Unlock()
	if down {
		return nil, &netError{syscall.ECONNREFUSED}
	}
	namespace := ""
	path := strings.TrimPrefix(req.URL.Path, "/api/v1/")
	if rest, ok := strings.CutPrefix(path, "namespaces/"); ok {
		namespace, path, _ = strings.Cut(rest, "/")
	}
	a.mu.Lock()
	refused := a.refused[namespace]
	a.mu.Unlock()
	if refused {
		return nil, &netError{syscall.ECONNREFUSED}
	}
	if path != "pods" {
		return respond(req, http.StatusNotFound, &metav1.Status{Status: metav1.StatusFailure, Code: 404, Reason: metav1.StatusReasonNotFound})
	}
	q := req.URL.Query()
	if q.Get("watch") == "true" {
		from, _ := strconv.ParseUint(q.Get("resourceVersion"), 10, 64)
		return a.watch(req, namespace, from)
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	a.mu.Lock()
	list := &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"},
		ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatUint(a.rv, 10)}}
	for ns, pods := range a.pods {
		if namespace != "" && ns != namespace {
			continue
		}
		for _, p := range pods {
			list.Items = append(list.Items, *p)
		}
	}
	a.mu.Unlock()
	return respond(req, http.StatusOK, list)
}

func (a *fakeAPI) watch(req *http.Request, namespace string, from uint64) (*http.Response, error) {
	pr, pw := io.Pipe()
	w := &fakeWatch{namespace: namespace, pw: pw, wake: make(chan struct{}, 1), done: make(chan struct{})}
	a.mu.Lock()
	if from < a.compacted {
		w.expired = true
	} else {
		for _, ev := range a.log {
			if ev.rv > from {
				w.send(ev)
			}
		}
		a.watches[w] = struct{}{}
	}
	a.mu.Unlock()
	go w.run(req.Context())
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": []string{"application/json"}},
		Body: pr, Request: req}, nil
}

// fakeWatch is one watch's stream: the events of its namespace (all when
// ""), sent in order by run.
type fakeWatch struct {
	namespace string
	pw        *io.PipeWriter
	expired   bool

	mu      sync.Mutex
	pending []apiEvent
	ended   bool
	wake    chan struct{}
	done    chan struct{}
}

func (w *fakeWatch) send(ev apiEvent) {
	if w.namespace != "" && ev.pod.Namespace != w.namespace {
		return
	}
	w.mu.Lock()
	w.pending = append(w.pending, ev)
	w.mu.Unlock()
	w.poke()
}

func (w *fakeWatch) end() {
	w.mu.Lock()
	w.ended = true
	w.mu.Unlock()
	w.poke()
}

func (w *fakeWatch) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *fakeWatch) run(ctx context.Context) {
	defer close(w.done)
	enc := json.NewEncoder(w.pw)
	if w.expired {
		_ = enc.Encode(metav1.WatchEvent{Type: "ERROR", Object: rawOf(&metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
			Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired, Message: "too old resource version"})})
		_ = w.pw.Close()
		return
	}
	for {
		w.mu.Lock()
		evs, ended := w.pending, w.ended
		w.pending = nil
		w.mu.Unlock()
		for _, ev := range evs {
			if err := enc.Encode(metav1.WatchEvent{Type: ev.typ, Object: rawOf(ev.pod)}); err != nil {
				return
			}
		}
		if ended {
			_ = w.pw.Close()
			return
		}
		select {
		case <-w.wake:
		case <-ctx.Done():
			_ = w.pw.CloseWithError(ctx.Err())
			return
		}
	}
}

func rawOf(o any) runtime.RawExtension {
	b, err := json.Marshal(o)
	if err != nil {
		panic(err)
	}
	return runtime.RawExtension{Raw: b}
}

func respond(req *http.Request, code int, body any) (*http.Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return &http.Response{StatusCode: code, Header: http.Header{"Content-Type": []string{"application/json"}},
		Body: io.NopCloser(bytes.NewReader(b)), Request: req}, nil
}

// netError is a refused connection, as client-go's retries recognize it.
type netError struct{ errno syscall.Errno }

func (e *netError) Error() string { return fmt.Sprintf("dial tcp 127.0.0.1:6443: %v", e.errno) }
func (e *netError) Unwrap() error { return e.errno }
