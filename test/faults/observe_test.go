//go:build faults

package faults_test

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	watchtools "k8s.io/client-go/tools/watch"
)

// listWatch lists a kind in one namespace, and watches it from a
// resourceVersion: the two halves of an observer.
type listWatch struct {
	list  func(ctx context.Context) (resourceVersion string, items []runtime.Object, err error)
	watch func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

func (lw listWatch) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return lw.watch(ctx, opts)
}

// observe checks invariants continuously: it lists what lw lists, calls
// onEvent with each item as Added, then with every change the apiserver
// reports, in order, until the test ends. It watches through the test's
// own admin connection, not the manager's cache: it sees every
// intermediate state the apiserver held, also those a controller's cache
// coalesces.
func observe(t *testing.T, lw listWatch, onEvent func(watch.Event)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rv, items, err := lw.list(ctx)
	if err != nil {
		cancel()
		t.Fatalf("observer: listing: %v", err)
	}
	for _, obj := range items {
		onEvent(watch.Event{Type: watch.Added, Object: obj})
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, rv, lw)
	if err != nil {
		cancel()
		t.Fatalf("observer: watching: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				continue // the retry watcher resumes on its own
			}
			onEvent(ev)
		}
	}()
	inBackground(t, func() {
		w.Stop()
		cancel()
		<-done
	})
}

// violation is one invariant broken: the check's name and what was seen.
type violation struct {
	check, detail string
}

func (v violation) String() string { return fmt.Sprintf("%s: %s", v.check, v.detail) }
