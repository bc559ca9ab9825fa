package eventnote_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deckhand-dev/deckhand/internal/eventnote"
)

func TestNames(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{nil, ""},
		{[]string{"b"}, "b"},
		{[]string{"c", "a", "b"}, "a, b, c"},
		{[]string{"e", "d", "c", "b", "a"}, "a, b, c and 2 more"},
	} {
		objs := make([]*metav1.ObjectMeta, len(tc.names))
		for i, n := range tc.names {
			objs[i] = &metav1.ObjectMeta{Name: n}
		}
		if got := eventnote.Names(objs); got != tc.want {
			t.Errorf("Names(%q) = %q, want %q", tc.names, got, tc.want)
		}
	}
}

func TestCount(t *testing.T) {
	for n, want := range map[int]string{0: "0 pods", 1: "1 pod", 2: "2 pods"} {
		if got := eventnote.Count(n, "pod"); got != want {
			t.Errorf("Count(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestList(t *testing.T) {
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{nil, ""},
		{[]string{"Deployment"}, "Deployment"},
		{[]string{"Deployment", "Service"}, "Deployment and Service"},
		{[]string{"Deployment", "Service", "PodDisruptionBudget"}, "Deployment, Service and PodDisruptionBudget"},
	} {
		if got := eventnote.List(tc.words); got != tc.want {
			t.Errorf("List(%q) = %q, want %q", tc.words, got, tc.want)
		}
	}
}
