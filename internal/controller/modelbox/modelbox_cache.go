package modelbox

import (
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CacheByObject is how the manager's cache must hold the kinds a ModelBox
// owns: only Deckhand's own (labelled) objects, and with their managedFields,
// which tell which fields Deckhand owns and so whether an apply would change
// anything.
func CacheByObject() map[client.Object]cache.ByObject {
	req, err := labels.NewRequirement(LabelModelBox, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant label key is valid
	}
	byObject := cache.ByObject{
		Label:     labels.NewSelector().Add(*req),
		Transform: func(o any) (any, error) { return o, nil },
	}
	return map[client.Object]cache.ByObject{
		&appsv1.Deployment{}:                     byObject,
		&corev1.Service{}:                        byObject,
		&autoscalingv2.HorizontalPodAutoscaler{}: byObject,
		&policyv1.PodDisruptionBudget{}:          byObject,
	}
}
