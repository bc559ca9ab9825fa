package v1beta1

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
)

// A review written by hand for another namespace is refused before the
// validator reads that namespace's labels (its Reader is nil here: a read
// would panic).
func TestAForgedReviewReadsNoNamespace(t *testing.T) {
	ctx := admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: "mine"}})
	pb := &debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: "theirs", Name: "dbg"}}
	_, err := (&PodBuggerValidator{}).ValidateCreate(ctx, pb)
	if err == nil || !strings.Contains(err.Error(), `metadata.namespace: Invalid value: "theirs": the admission request is for namespace "mine"`) {
		t.Errorf("got %v, want the review refused for its namespace", err)
	}
}
