package v1alpha1_test

import (
	"testing"

	debugv1alpha1 "github.com/deckhand-dev/deckhand/api/debug/v1alpha1"
	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/testenv/convtest"
)

func TestPodBuggerConversionRoundTrips(t *testing.T) {
	convtest.RoundTrip(t,
		func() *debugv1alpha1.PodBugger { return &debugv1alpha1.PodBugger{} },
		func() *debugv1beta1.PodBugger { return &debugv1beta1.PodBugger{} })
}
