package podbugger

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/policy"
)

func TestPrunePlanKeepsTheLatestWithinAge(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	rec := func(name string, ago time.Duration) debugv1beta1.PodIncident {
		return debugv1beta1.PodIncident{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: debugv1beta1.PodIncidentSpec{LastTime: metav1.NewTime(now.Add(-ago))}}
	}
	keep, drop := prunePlan([]debugv1beta1.PodIncident{rec("old", 2*time.Hour), rec("a", time.Minute), rec("b", 2*time.Minute), rec("c", 3*time.Minute)},
		policy.IncidentLimits{MaxRecords: 2, MaxAge: time.Hour}, now)
	if len(keep) != 2 || keep[0].Name != "a" || keep[1].Name != "b" || len(drop) != 2 {
		t.Errorf("keep %v, drop %v", keep, drop)
	}
}
