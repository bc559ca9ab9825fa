package podset

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/scopedcache"
)

// Needs says where the manager must cache pods for this controller: in the
// namespaces that have a PodSet. A PodSet acts on pods of its own namespace
// only.
func Needs() []scopedcache.Need {
	return []scopedcache.Need{{Object: &corev1.Pod{}, Triggers: []client.Object{&appsv1beta1.PodSet{}},
		Namespaces: scopedcache.NamespacesOf(&appsv1beta1.PodSetList{})}}
}
