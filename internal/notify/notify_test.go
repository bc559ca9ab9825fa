package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// receiver is a webhook receiver on loopback that can fail, hang and come
// back, and keeps what it was sent by idempotency key.
type receiver struct {
	*httptest.Server
	mu sync.Mutex
	// failFirst answers 503 to the first requests; hangFirst then keeps
	// as many waiting past the client's timeout.
	failFirst, hangFirst int
	requests             int
	byKey                map[string]int
	order                []string
	bodies               [][]byte
	headers              []http.Header
}

func newReceiver(t *testing.T, failFirst, hangFirst int) *receiver {
	r := &receiver{failFirst: failFirst, hangFirst: hangFirst, byKey: map[string]int{}}
	r.Server = httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.Listener = l
	r.Start()
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.requests++
	n := r.requests
	r.mu.Unlock()
	switch {
	case n <= r.failFirst:
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	case n <= r.failFirst+r.hangFirst:
		select {
		case <-req.Context().Done():
		case <-time.After(2 * time.Second):
		}
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	key := req.Header.Get("Idempotency-Key")
	if r.byKey[key] == 0 {
		r.order = append(r.order, key)
	}
	r.byKey[key]++
	r.bodies = append(r.bodies, b)
	r.headers = append(r.headers, req.Header.Clone())
}

func (r *receiver) keys() (distinct int, order []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byKey), append([]string(nil), r.order...)
}

func testOutbox() *Outbox {
	o := NewOutbox()
	o.Client = &http.Client{Timeout: 200 * time.Millisecond}
	o.MinBackoff, o.MaxBackoff = 10*time.Millisecond, 100*time.Millisecond
	return o
}

func message(ns string, i int) Message {
	at := time.Date(2026, 11, 29, 7, 0, i, 0, time.UTC)
	return Message{Key: fmt.Sprintf("%s/uid-%d/app/Error/%d", ns, i, at.Unix()), Type: TypeOpened, Namespace: ns,
		Source: "recorder", Pod: fmt.Sprintf("pod-%d", i), Container: "app", Reason: "Error", Count: 1, ExitCode: 1, FirstTime: at, LastTime: at}
}

// A receiver that fails, hangs past the timeout and comes back gets every
// notification: none lost, and none twice but under its own key.
func TestEveryNotificationArrivesThroughFailuresAndTimeouts(t *testing.T) {
	r := newReceiver(t, 5, 3)
	o := testOutbox()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go o.Run(ctx)
	const n = 40
	for i := range n {
		o.Enqueue("team-a", Target{Name: "hook", URL: r.URL}, message("team-a", i), nil)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if d, _, _ := o.Counts(); d == n {
			break
		}
		if time.Now().After(deadline) {
			d, dropped, expired := o.Counts()
			t.Fatalf("delivered %d of %d (dropped %d, expired %d)", d, n, dropped, expired)
		}
		time.Sleep(10 * time.Millisecond)
	}
	distinct, _ := r.keys()
	if distinct != n {
		t.Errorf("the receiver saw %d distinct keys, want %d", distinct, n)
	}
	if _, dropped, expired := o.Counts(); dropped+expired != 0 {
		t.Errorf("dropped %d, expired %d: want none", dropped, expired)
	}
}

// One namespace's storm does not hold back another's notification: the
// namespaces are served in turn.
func TestANoisyNamespaceDoesNotDelayAnother(t *testing.T) {
	r := newReceiver(t, 0, 0)
	o := testOutbox()
	o.Senders = 1
	for i := range 100 {
		o.Enqueue("noisy", Target{URL: r.URL}, message("noisy", i), nil)
	}
	o.Enqueue("quiet", Target{URL: r.URL}, message("quiet", 0), nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go o.Run(ctx)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if d, _, _ := o.Counts(); d == 101 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, order := r.keys()
	pos := -1
	for i, k := range order {
		if k == message("quiet", 0).Key {
			pos = i
		}
	}
	if pos < 0 || pos > 2 {
		t.Errorf("the quiet namespace's notification arrived %d-th of %d, want among the first 3", pos+1, len(order))
	}
}

// A namespace past its share loses its own oldest notification.
func TestANamespacePastItsShareLosesItsOwnOldest(t *testing.T) {
	o := testOutbox()
	o.PerNamespace = 3
	for i := range 5 {
		o.Enqueue("noisy", Target{}, message("noisy", i), nil)
	}
	o.Enqueue("quiet", Target{}, message("quiet", 0), nil)
	if len(o.queues["noisy"]) != 3 || len(o.queues["quiet"]) != 1 {
		t.Fatalf("queues: noisy %d, quiet %d; want 3 and 1", len(o.queues["noisy"]), len(o.queues["quiet"]))
	}
	if got := o.queues["noisy"][0].m.Pod; got != "pod-2" {
		t.Errorf("the noisy namespace's oldest kept is %s, want pod-2", got)
	}
	if _, dropped, _ := o.Counts(); dropped != 2 {
		t.Errorf("dropped %d, want 2", dropped)
	}
}

// Whoever queued a notification is told once what became of it: delivered,
// dropped (its namespace past its share) or expired.
func TestEachNotificationsOutcomeIsToldOnce(t *testing.T) {
	ok, failing := newReceiver(t, 0, 0), newReceiver(t, 1<<30, 0)
	o := testOutbox()
	o.MaxAge, o.PerNamespace = 300*time.Millisecond, 2
	var mu sync.Mutex
	told := map[string][]bool{}
	then := func(key string) func(bool) {
		return func(delivered bool) {
			mu.Lock()
			defer mu.Unlock()
			told[key] = append(told[key], delivered)
		}
	}
	// Queued before Run: the third of "crowded" drops its oldest.
	for i := range 3 {
		o.Enqueue("crowded", Target{URL: ok.URL}, message("crowded", i), then(fmt.Sprintf("crowded-%d", i)))
	}
	o.Enqueue("ns", Target{URL: ok.URL}, message("ns", 0), then("delivered"))
	o.Enqueue("other", Target{URL: failing.URL}, message("other", 0), then("expired"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go o.Run(ctx)
	want := map[string][]bool{"crowded-0": {false}, "crowded-1": {true}, "crowded-2": {true}, "delivered": {true}, "expired": {false}}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		done := fmt.Sprint(told) == fmt.Sprint(want)
		mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("told %v, want %v", told, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(told) != fmt.Sprint(want) {
		t.Fatalf("told %v after the outcomes, want each once: %v", told, want)
	}
}

// A notification the receiver never takes is given up after MaxAge.
func TestANotificationExpires(t *testing.T) {
	r := newReceiver(t, 1<<30, 0)
	o := testOutbox()
	o.MaxAge = 300 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go o.Run(ctx)
	o.Enqueue("ns", Target{URL: r.URL}, message("ns", 0), nil)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, _, expired := o.Counts(); expired == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the notification never expired")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Each format is what its receivers read, with the idempotency key and the
// bearer token.
func TestFormats(t *testing.T) {
	r := newReceiver(t, 0, 0)
	m := message("team", 1)
	for _, f := range []Format{FormatJSON, FormatSlack, FormatCloudEvents} {
		if err := Send(context.Background(), http.DefaultClient, Target{Name: string(f), URL: r.URL, Format: f, Token: "s3cr3t"}, m); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	for i, f := range []Format{FormatJSON, FormatSlack, FormatCloudEvents} {
		h, b := r.headers[i], r.bodies[i]
		if h.Get("Idempotency-Key") != m.Key || h.Get("Authorization") != "Bearer s3cr3t" {
			t.Errorf("%s: headers %v", f, h)
		}
		var got map[string]any
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: %v: %s", f, err, b)
		}
		switch f {
		case FormatJSON:
			if got["key"] != m.Key || got["pod"] != "pod-1" || got["type"] != TypeOpened {
				t.Errorf("JSON body %s", b)
			}
		case FormatSlack:
			if got["text"] != "team/pod-1 (app): Error (exit 1) at 2026-11-29T07:00:01Z" {
				t.Errorf("Slack body %s", b)
			}
		case FormatCloudEvents:
			if h.Get("Content-Type") != "application/cloudevents+json" || got["specversion"] != "1.0" || got["id"] != m.Key ||
				got["type"] != "dev.deckhand.podincident.opened" || got["source"] != "/deckhand/team/recorder" {
				t.Errorf("CloudEvents body %s (%s)", b, h.Get("Content-Type"))
			}
		}
	}
	if err := Send(context.Background(), http.DefaultClient, Target{URL: r.URL, Format: "XML"}, m); err == nil {
		t.Error("an unknown format was sent")
	}
}

// A namespace's notifications arrive in order, and one namespace's slow
// receiver holds one sender, not all.
func TestANamespacesNotificationsGoInOrderOneAtATime(t *testing.T) {
	var mu sync.Mutex
	inFlight, most := map[string]int{}, map[string]int{}
	var order []string
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		ns := r.Header.Get("X-Namespace")
		mu.Lock()
		inFlight[ns]++
		most[ns] = max(most[ns], inFlight[ns])
		mu.Unlock()
		if ns == "slow" {
			time.Sleep(50 * time.Millisecond)
		}
		mu.Lock()
		inFlight[ns]--
		order = append(order, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
	}))
	defer srv.Close()
	o := testOutbox()
	o.Client.Transport = headerTransport{}
	for i := range 6 {
		o.Enqueue("slow", Target{URL: srv.URL + "?ns=slow"}, message("slow", i), nil)
	}
	first, second := message("a", 0), message("a", 0)
	second.Type, second.Key = TypeClosed, first.Key+"/closed"
	o.Enqueue("a", Target{URL: srv.URL + "?ns=a"}, first, nil)
	o.Enqueue("a", Target{URL: srv.URL + "?ns=a"}, second, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go o.Run(ctx)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if d, _, _ := o.Counts(); d == 8 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if most["slow"] != 1 {
		t.Errorf("the slow namespace had %d notifications in flight at once, want 1", most["slow"])
	}
	ia, ib := -1, -1
	for i, k := range order {
		switch k {
		case first.Key:
			ia = i
		case second.Key:
			ib = i
		}
	}
	if ia < 0 || ib < 0 || ib < ia {
		t.Errorf("namespace a's opening at %d, its summary at %d: want the opening first", ia, ib)
	}
}

// headerTransport copies the ns query parameter into a header.
type headerTransport struct{}

func (headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Namespace", r.URL.Query().Get("ns"))
	return http.DefaultTransport.RoundTrip(r)
}
