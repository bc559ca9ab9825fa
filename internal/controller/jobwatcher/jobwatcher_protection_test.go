package jobwatcher

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	"github.com/deckhand-dev/deckhand/internal/setupoptions"
)

func TestProtection(t *testing.T) {
	ns := func(name string, labels map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	namespaces := fake.NewClientBuilder().WithObjects(
		ns("team-a", nil),
		ns("platform", map[string]string{deckhandbatchv1.ProtectedNamespaceLabel: "true"}),
		ns("half", map[string]string{deckhandbatchv1.ProtectedNamespaceLabel: "yes"}),
	).Build()
	tests := map[string]struct {
		opts setupoptions.Options
		ns   string
		want bool
	}{
		"a tenant's namespace":                      {ns: "team-a"},
		"kube-system by default":                    {ns: "kube-system", want: true},
		"cert-manager by default":                   {ns: "cert-manager", want: true},
		"the manager's own":                         {opts: setupoptions.Options{ManagerNamespace: "deckhand-system"}, ns: "deckhand-system", want: true},
		"labelled deckhand.dev/protected=true":      {ns: "platform", want: true},
		"labelled with another value":               {ns: "half"},
		"a namespace the cache does not show":       {ns: "gone"},
		"the operator's list replaces the defaults": {opts: setupoptions.Options{JobWatcherProtectedNamespaces: []string{"team-a"}}, ns: "team-a", want: true},
		"kube-system, left out of the list":         {opts: setupoptions.Options{JobWatcherProtectedNamespaces: []string{"team-a"}}, ns: "kube-system"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := newProtection(ProtectedNamespaces(tt.opts), namespaces).protects(tt.ns); got != tt.want {
				t.Errorf("protects(%q) = %v, want %v", tt.ns, got, tt.want)
			}
		})
	}
	broken := fake.NewClientBuilder().WithScheme(runtime.NewScheme()).Build()
	if !newProtection(nil, broken).protects("team-a") {
		t.Error("a namespace whose labels cannot be read is not protected")
	}
}
