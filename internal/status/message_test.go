package status_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/status"
)

// hugeError is what a condition built from errors or lists can say: far
// over the 32 KiB the CRDs allow a condition message.
var hugeError = "creating pods: " + strings.Repeat("admission webhook denied the request: name too long; ", 2000)

func TestSetConditionCutsALongMessage(t *testing.T) {
	var conds []metav1.Condition
	now := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	status.SetCondition(&conds, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Failed", Message: hugeError}, now)
	msg := conds[0].Message
	if len(msg) > status.MaxMessage || !strings.HasPrefix(msg, "creating pods: admission webhook denied") || !strings.HasSuffix(msg, "bytes cut]") {
		t.Fatalf("message (%d bytes) %q…%q", len(msg), msg[:40], msg[len(msg)-40:])
	}
	status.SetCondition(&conds, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Failed", Message: "short"}, now)
	if conds[0].Message != "short" {
		t.Fatalf("short message changed: %q", conds[0].Message)
	}
}

// A status whose condition carries a huge error is still written: without
// the cut, the apiserver refuses the whole status (message over 32768
// bytes), and everything else it says (counts, what a brake reads) is lost
// with it.
func TestAStatusWithAHugeErrorIsStillWritten(t *testing.T) {
	g := NewWithT(t)
	set := newSet(t)
	want := appsv1beta1.PodSetStatus{Replicas: 3}
	status.SetCondition(&want.Conditions, metav1.Condition{Type: appsv1beta1.ConditionReplicaFailure, Status: metav1.ConditionTrue,
		Reason: "FailedCreate", Message: hugeError}, metav1.Now())
	g.Expect(status.NewWriter[appsv1beta1.PodSetStatus](env.Client).Write(ctx, set, &set.Status, want)).Error().To(Succeed())
	got := serverStatus(g, set)
	g.Expect(got.Replicas).To(BeEquivalentTo(3))
	g.Expect(got.Conditions).To(ContainElement(HaveField("Message", And(
		HavePrefix("creating pods: admission webhook denied"), HaveSuffix("bytes cut]"), HaveLen(len(want.Conditions[0].Message))))))
}
