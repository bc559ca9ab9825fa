package status

import (
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// conditionGauge shows every condition of every object a Writer with
// ConditionMetrics wrote (or found already written): what alerts on a
// kind's conditions (a PodSet's ReplicaFailure, a ModelBox not Available, a
// PodBugger Blocked) query. It is set by the leader only, the one replica
// that writes status.
var conditionGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "deckhand_status_condition",
	Help: "A condition of a Deckhand object, by kind, namespace, name, condition type and reason: 1 when True, 0 when False, -1 when Unknown.",
}, []string{"kind", "namespace", "name", "type", "reason"})

func init() { metrics.Registry.MustRegister(conditionGauge) }

// ConditionMetrics makes a Writer show the conditions of each status it
// writes in the deckhand_status_condition gauge, labelled with kind;
// conditions returns a status's conditions.
func ConditionMetrics[S any](kind string, conditions func(*S) []metav1.Condition) Option[S] {
	return func(w *Writer[S]) {
		w.kind, w.conditions = kind, conditions
	}
}

// Option configures a Writer.
type Option[S any] func(*Writer[S])

// conditionValue is the gauge's value for a condition status.
func conditionValue(s metav1.ConditionStatus) float64 {
	switch s {
	case metav1.ConditionTrue:
		return 1
	case metav1.ConditionFalse:
		return 0
	default:
		return -1
	}
}

// showConditions sets the gauge to the conditions of the status st of the
// object key names: one series per condition type, labelled with its
// current reason. Series of a reason or type the status no longer has go.
func (w *Writer[S]) showConditions(key types.NamespacedName, st *S) {
	if w.conditions == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := map[string]string{}
	for _, c := range w.conditions(st) {
		now[c.Type] = c.Reason
		conditionGauge.WithLabelValues(w.kind, key.Namespace, key.Name, c.Type, c.Reason).Set(conditionValue(c.Status))
	}
	for typ, reason := range w.shown[key] {
		if r, ok := now[typ]; !ok || r != reason {
			conditionGauge.DeleteLabelValues(w.kind, key.Namespace, key.Name, typ, reason)
		}
	}
	w.shown[key] = now
}

// forgetConditions drops the series of the object key names. The caller
// holds w.mu.
func (w *Writer[S]) forgetConditions(key types.NamespacedName) {
	for typ, reason := range w.shown[key] {
		conditionGauge.DeleteLabelValues(w.kind, key.Namespace, key.Name, typ, reason)
	}
	delete(w.shown, key)
}
