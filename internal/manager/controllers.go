package manager

import (
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/deckhand-dev/deckhand/api/apps/v1alpha1"
	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	debugv1alpha1 "github.com/deckhand-dev/deckhand/api/debug/v1alpha1"
	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
	jobwatchercontroller "github.com/deckhand-dev/deckhand/internal/controller/jobwatcher"
	modelboxcontroller "github.com/deckhand-dev/deckhand/internal/controller/modelbox"
	podbuggercontroller "github.com/deckhand-dev/deckhand/internal/controller/podbugger"
	podsetcontroller "github.com/deckhand-dev/deckhand/internal/controller/podset"
	"github.com/deckhand-dev/deckhand/internal/scopedcache"
	"github.com/deckhand-dev/deckhand/internal/setupoptions"
	appswebhook "github.com/deckhand-dev/deckhand/internal/webhook/apps/v1beta1"
	batchwebhook "github.com/deckhand-dev/deckhand/internal/webhook/batch/v1"
	debugwebhook "github.com/deckhand-dev/deckhand/internal/webhook/debug/v1beta1"
)

// Controller is one kind's reconciler together with its webhooks, switched on
// and off as a unit with --controllers.
type Controller struct {
	// Name is what --controllers calls it: the package's ControllerName.
	Name string
	// AddToScheme registers the kind's API group, every version of it (the
	// generated <group>/<version>.AddToScheme). It runs whether or not the
	// controller is enabled, so clients can always read every Deckhand kind.
	AddToScheme func(*runtime.Scheme) error
	// Setup registers the reconcilers with the manager: the controller
	// package's Setup.
	Setup func(ctrl.Manager, setupoptions.Options) error
	// SetupWebhooks registers the kind's admission webhooks: the webhook
	// package's Setup, nil for a kind without webhooks. The manager is then
	// only ready once the webhook server serves.
	SetupWebhooks func(ctrl.Manager, setupoptions.Options) error
	// SetupConversion registers the conversion webhook of a kind served in
	// more than one version: the webhook package's SetupConversion, nil for
	// a kind with one version. It runs whenever the manager serves webhooks,
	// whether or not the controller is enabled: the apiserver cannot serve
	// the kind's other versions (nor read objects stored in them) without it.
	SetupConversion func(ctrl.Manager) error
	// CacheByObject, when set, says how the manager's cache holds some kinds
	// (label selector, transform) for this controller. A kind belongs to one
	// controller: it applies to every reader of that kind.
	CacheByObject func() map[client.Object]cache.ByObject
	// Needs, when set, names the kinds this controller reads that the
	// manager caches only in the namespaces some enabled controller needs
	// them in (pods, Jobs: internal/scopedcache), and how to find those
	// namespaces. A kind any controller names is scoped for every reader.
	Needs func() []scopedcache.Need
}

// controllers lists every controller Deckhand can run, in start order.
// A new kind adds one line here (docs/contributing.md has the checklist).
var controllers = []Controller{
	{Name: podsetcontroller.ControllerName, AddToScheme: versions(appsv1beta1.AddToScheme, appsv1alpha1.AddToScheme), Setup: podsetcontroller.Setup, Needs: podsetcontroller.Needs, SetupWebhooks: appswebhook.Setup, SetupConversion: appswebhook.SetupConversion},
	{Name: modelboxcontroller.ControllerName, AddToScheme: modelv1.AddToScheme, Setup: modelboxcontroller.Setup, CacheByObject: modelboxcontroller.CacheByObject},
	{Name: jobwatchercontroller.ControllerName, AddToScheme: deckhandbatchv1.AddToScheme, Setup: jobwatchercontroller.Setup, SetupWebhooks: batchwebhook.Setup, CacheByObject: jobwatchercontroller.CacheByObject, Needs: jobwatchercontroller.Needs},
	{Name: podbuggercontroller.ControllerName, AddToScheme: versions(debugv1beta1.AddToScheme, debugv1alpha1.AddToScheme), Setup: podbuggercontroller.Setup, SetupWebhooks: debugwebhook.Setup, Needs: podbuggercontroller.Needs, SetupConversion: debugwebhook.SetupConversion},
}

// versions registers every version of an API group.
func versions(addToScheme ...func(*runtime.Scheme) error) func(*runtime.Scheme) error {
	b := runtime.NewSchemeBuilder(addToScheme...)
	return b.AddToScheme
}

// KnownControllers returns the names --controllers accepts.
func KnownControllers() []string {
	names := make([]string, 0, len(controllers))
	for _, c := range controllers {
		names = append(names, c.Name)
	}
	return names
}
