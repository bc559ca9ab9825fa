package manager

import (
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/deckhand-dev/deckhand/api/apps/v1alpha1"
	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	debugv1alpha1 "github.com/deckhand-dev/deckhand/api/debug/v1alpha1"
	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
	"github.com/deckhand-dev/deckhand/internal/controller/apps"
	"github.com/deckhand-dev/deckhand/internal/controller/batch"
	debugcontroller "github.com/deckhand-dev/deckhand/internal/controller/debug"
	modelcontroller "github.com/deckhand-dev/deckhand/internal/controller/model"
	debugwebhook "github.com/deckhand-dev/deckhand/internal/webhook/debug/v1alpha1"
)

// Controller is one kind's reconciler together with its webhooks, switched on
// and off as a unit with --controllers.
type Controller struct {
	// Name is what --controllers calls it: the lower-case kind.
	Name string
	// AddToScheme registers the kind's API group (the generated
	// <group>/<version>.AddToScheme). It runs whether or not the controller is
	// enabled, so clients can always read every Deckhand kind.
	AddToScheme func(*runtime.Scheme) error
	// Setup registers the reconciler and webhooks with the manager.
	Setup func(mgr ctrl.Manager, opts *Options) error
	// Webhooks says whether Setup registers admission webhooks; the manager
	// is then only ready once the webhook server serves.
	Webhooks bool
	// CacheByObject, when set, says how the manager's cache holds some kinds
	// (label selector, transform) for this controller. A kind belongs to one
	// controller: it applies to every reader of that kind.
	CacheByObject func() map[client.Object]cache.ByObject
}

// controllers lists every controller Deckhand can run, in start order.
// A new kind adds one line here.
var controllers = []Controller{
	{Name: apps.ControllerName, AddToScheme: appsv1alpha1.AddToScheme, Setup: func(mgr ctrl.Manager, _ *Options) error { return apps.SetupPodSet(mgr) }},
	{Name: modelcontroller.ControllerName, AddToScheme: modelv1.AddToScheme, CacheByObject: modelcontroller.CacheByObject,
		Setup: func(mgr ctrl.Manager, _ *Options) error { return modelcontroller.Setup(mgr) }},
	// jobwatcher runs both JobWatchers and ClusterJobWatchers: precedence
	// between them needs both, so they cannot be switched on apart.
	{Name: "jobwatcher", AddToScheme: deckhandbatchv1.AddToScheme, CacheByObject: batch.CacheByObject, Webhooks: true,
		Setup: func(mgr ctrl.Manager, _ *Options) error { return batch.Setup(mgr) }},
	{Name: debugcontroller.ControllerName, AddToScheme: debugv1alpha1.AddToScheme, Webhooks: true,
		Setup: func(mgr ctrl.Manager, o *Options) error {
			images, err := debugwebhook.ParseImagePatterns(o.PodBuggerAllowedImages)
			if err != nil {
				return err
			}
			return debugcontroller.Setup(mgr, debugwebhook.Policy{AllowedImages: images, AllowGeneralProfile: o.PodBuggerAllowGeneralProfile})
		}},
}

// KnownControllers returns the names --controllers accepts.
func KnownControllers() []string {
	names := make([]string, 0, len(controllers))
	for _, c := range controllers {
		names = append(names, c.Name)
	}
	return names
}
