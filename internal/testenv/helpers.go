package testenv

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	dto "github.com/prometheus/client_model/go"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// EventRecorder returns a recorder that writes Events to the apiserver as a
// manager's does, merging alike ones into series, until the test ends: for
// tests of what `kubectl events` shows.
func (e *Env) EventRecorder(t testing.TB, controller string) events.EventRecorder {
	ctx, cancel := context.WithCancel(context.Background())
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: kubernetes.NewForConfigOrDie(e.Config).EventsV1()})
	broadcaster.StartRecordingToSink(ctx.Done())
	t.Cleanup(func() {
		broadcaster.Shutdown()
		cancel()
	})
	return broadcaster.NewRecorder(e.Client.Scheme(), controller)
}

// Timeout bounds every wait in Deckhand's integration tests: long enough
// for a busy 2-core machine, short enough that a stuck test fails in time.
const Timeout = 30 * time.Second

// NewG returns a Gomega for t with the defaults every integration test uses:
// Eventually waits up to Timeout, polling every 100 ms; Consistently watches
// for 2 s.
func NewG(t types.GomegaTestingT) *gomega.WithT {
	g := gomega.NewWithT(t)
	g.SetDefaultEventuallyTimeout(Timeout)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	g.SetDefaultConsistentlyDuration(2 * time.Second)
	g.SetDefaultConsistentlyPollingInterval(100 * time.Millisecond)
	return g
}

// Create creates obj as a cluster admin, failing the test if it cannot.
//
// A create the apiserver refuses because it could not call a webhook is
// tried again for a few seconds: the apiserver learns of a webhook
// configuration changed a moment ago (WithoutValidation) from a watch, and
// may still call the webhook it removed.
func (e *Env) Create(t TB, obj client.Object) {
	t.Helper()
	deadline := time.Now().Add(webhookConfigLag)
	for {
		err := e.Client.Create(context.Background(), obj)
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "failed calling webhook") || time.Now().After(deadline) {
			t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// webhookConfigLag bounds how long the apiserver may go on calling a
// webhook after its configuration changed.
const webhookConfigLag = 5 * time.Second

// TB is the part of testing.TB the helpers use.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Update reads the latest obj, applies mutate and writes it, retrying on
// conflicts (controllers write status meanwhile).
func (e *Env) Update(obj client.Object, mutate func()) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := e.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		mutate()
		return e.Client.Update(context.Background(), obj)
	})
}

// Exists reports whether obj is on the apiserver and not being deleted; it
// reads obj afresh each time, for Eventually and Consistently.
func (e *Env) Exists(obj client.Object) func() (bool, error) {
	return func() (bool, error) {
		err := e.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && obj.GetDeletionTimestamp().IsZero(), err
	}
}

// Events returns "Reason: note" of the Events in namespace ns regarding obj
// (every Event of ns when obj is nil), for Eventually.
func (e *Env) Events(ns string, obj client.Object) func() ([]string, error) {
	return func() ([]string, error) {
		var list eventsv1.EventList
		if err := e.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		var out []string
		for _, ev := range list.Items {
			if obj == nil || (ev.Regarding.Name == obj.GetName() && ev.Regarding.UID == obj.GetUID()) {
				out = append(out, fmt.Sprintf("%s: %s", ev.Reason, ev.Note))
			}
		}
		return out, nil
	}
}

// Metric sums the samples of the named counter or gauge in this process's
// controller-runtime registry (where the managers a test starts register)
// whose labels include every one of labels.
func Metric(name string, labels map[string]string) (float64, error) {
	samples, err := metricSamples(name, labels)
	var sum float64
	for _, m := range samples {
		sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return sum, err
}

// MetricSeries counts the series of the named metric whose labels include
// every one of labels: zero once a controller forgot an object's series.
func MetricSeries(name string, labels map[string]string) (int, error) {
	samples, err := metricSamples(name, labels)
	return len(samples), err
}

func metricSamples(name string, labels map[string]string) ([]*dto.Metric, error) {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return nil, err
	}
	var out []*dto.Metric
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if hasAll(got, labels) {
				out = append(out, m)
			}
		}
	}
	return out, nil
}

func hasAll(got, want map[string]string) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// HaveCondition matches a []metav1.Condition holding a condition of type typ
// with the given status and, unless empty, reason.
func HaveCondition(typ string, status metav1.ConditionStatus, reason string) types.GomegaMatcher {
	want := []types.GomegaMatcher{gomega.Not(gomega.BeNil()), gomega.HaveField("Status", status)}
	if reason != "" {
		want = append(want, gomega.HaveField("Reason", reason))
	}
	return gomega.WithTransform(func(conds []metav1.Condition) *metav1.Condition {
		return meta.FindStatusCondition(conds, typ)
	}, gomega.And(want...))
}
