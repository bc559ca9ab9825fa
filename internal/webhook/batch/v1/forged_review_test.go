package v1

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
)

// reviewFor is the context of an admission review for namespace ns, as the
// webhook server hands it to a validator.
func reviewFor(ns string) context.Context {
	return admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: ns}})
}

// A review written by hand to the webhook port meets no schema and may
// name any namespace: the validators refuse what the apiserver would never
// send before they do any work for it.
func TestForgedReviewsAreRefusedBeforeAnyWork(t *testing.T) {
	watcher := func(ns string, patterns int) *deckhandbatchv1.JobWatcher {
		w := &deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"},
			Spec: deckhandbatchv1.JobWatcherSpec{JobPolicy: deckhandbatchv1.JobPolicy{TTLSecondsAfterSucceeded: ptr.To[int32](60)}}}
		for range patterns {
			w.Spec.JobNamePatterns = append(w.Spec.JobNamePatterns, `(?i)\pL{100}`)
		}
		return w
	}
	cluster := &deckhandbatchv1.ClusterJobWatcher{ObjectMeta: metav1.ObjectMeta{Name: "c"},
		Spec: deckhandbatchv1.ClusterJobWatcherSpec{JobPolicy: deckhandbatchv1.JobPolicy{TTLSecondsAfterSucceeded: ptr.To[int32](60)}}}
	tests := map[string]struct {
		err  func() error
		want string
	}{
		"a JobWatcher of another namespace": {func() error {
			_, err := jobWatcherValidator{}.ValidateCreate(reviewFor("mine"), watcher("theirs", 0))
			return err
		}, `metadata.namespace: Invalid value: "theirs": the admission request is for namespace "mine"`},
		"a ClusterJobWatcher in a namespaced review": {func() error {
			_, err := clusterJobWatcherValidator{}.ValidateUpdate(reviewFor("mine"), cluster, cluster)
			return err
		}, `the admission request is for namespace "mine"`},
		"a namespaced JobWatcher with no namespace": {func() error {
			_, err := jobWatcherValidator{}.ValidateCreate(reviewFor(""), watcher("", 0))
			return err
		}, `the admission request is for namespace ""`},
		"100,000 patterns, refused by count, none compiled": {func() error {
			_, err := jobWatcherValidator{}.ValidateCreate(reviewFor("mine"), watcher("mine", 100_000))
			return err
		}, "spec.jobNamePatterns: Too many: 100000: must have at most 64 items"},
		"a pattern longer than the schema allows": {func() error {
			w := watcher("mine", 0)
			w.Spec.ExcludeJobNamePatterns = []string{strings.Repeat("a", 1025)}
			_, err := jobWatcherValidator{}.ValidateCreate(reviewFor("mine"), w)
			return err
		}, "spec.excludeJobNamePatterns[0]: Too long: may not be more than 1024 bytes"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			err := tt.err()
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an Invalid error saying %q", err, tt.want)
			}
		})
	}
	ok := watcher("mine", 0)
	ok.Spec.JobNamePatterns = []string{"pi-.*"}
	if _, err := (jobWatcherValidator{}).ValidateCreate(reviewFor("mine"), ok); err != nil {
		t.Errorf("a JobWatcher reviewed in its own namespace: %v", err)
	}
}
