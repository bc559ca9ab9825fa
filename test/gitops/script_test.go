package gitops

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// object is a PodSet-shaped object at generation 2 with status st.
func object(st map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps.deckhand.dev/v1beta1", "kind": "PodSet",
		"metadata": map[string]any{"name": "web", "namespace": "default", "generation": int64(2)},
	}}
	if st != nil {
		u.Object["status"] = st
	}
	return u
}

func cond(typ, status, reason string, generation int64) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": reason + " message", "observedGeneration": generation}
}

func conds(c ...map[string]any) []any {
	out := make([]any, len(c))
	for i := range c {
		out[i] = c[i]
	}
	return out
}

// The Argo CD script reads each status shape as kstatus and kubectl wait do.
func TestTheArgoCDScriptAgreesWithKstatus(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   map[string]any
		want verdict
	}{
		{"no status yet", nil, verdict{Kstatus: "Current", Argo: "Progressing"}},
		{"the generation not observed yet", map[string]any{"observedGeneration": int64(1),
			"conditions": conds(cond("Ready", "True", "UpToDate", 1))}, progressing},
		{"ready", map[string]any{"observedGeneration": int64(2),
			"conditions": conds(cond("Ready", "True", "UpToDate", 2), cond("Stalled", "False", "AsExpected", 2))}, healthy},
		{"converging", map[string]any{"observedGeneration": int64(2),
			"conditions": conds(cond("Ready", "False", "ScalingUp", 2), cond("Stalled", "False", "AsExpected", 2))}, progressing},
		{"stuck", map[string]any{"observedGeneration": int64(2),
			"conditions": conds(cond("Ready", "False", "FailedCreate", 2), cond("Stalled", "True", "FailedCreate", 2))}, degraded},
		{"suspended", map[string]any{"observedGeneration": int64(2),
			"conditions": conds(cond("Ready", "True", "Suspended", 2), cond("Stalled", "False", "AsExpected", 2))}, suspended},
		{"a Ready condition of the previous generation", map[string]any{"observedGeneration": int64(2),
			"conditions": conds(cond("Ready", "True", "UpToDate", 1))}, verdict{Kstatus: "Current", Argo: "Progressing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := judgeUnstructured(t, object(tc.st))
			if !got.same(tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// judgeUnstructured is judge for an object that is not of a Go type.
func judgeUnstructured(t *testing.T, u *unstructured.Unstructured) verdict {
	t.Helper()
	res, err := statusCompute(u)
	if err != nil {
		t.Fatal(err)
	}
	argo, msg, err := argoHealth(healthScript(t, u), u)
	if err != nil {
		t.Fatal(err)
	}
	return verdict{Kstatus: res, Argo: argo, Message: msg, Waited: waitReturns(u)}
}
