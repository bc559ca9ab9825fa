package podbugger

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/scopedcache"
)

// Needs says where the manager must cache pods for this controller: in the
// namespaces that have a PodBugger. A PodBugger injects into pods of its own
// namespace only.
func Needs() []scopedcache.Need {
	return []scopedcache.Need{{Object: &corev1.Pod{}, Triggers: []client.Object{&debugv1beta1.PodBugger{}},
		Namespaces: scopedcache.NamespacesOf(&debugv1beta1.PodBuggerList{})}}
}
