package manager

import (
	"flag"
	"fmt"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/conversion"

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
	// SlimPod, when set, copies into slim the fields of pod that this
	// controller reads from the cache, beyond the metadata every cached pod
	// keeps: the cache keeps no pod whole (a PodSet's template, sized by a
	// namespace editor, would be held once per pod), so a controller that
	// reads pods from the cache says here what of them it reads.
	SlimPod func(pod, slim *corev1.Pod)
	// BindFlags, when set, registers the kind's own flags (named after it,
	// setting the fields of setupoptions.Options named after it).
	BindFlags func(*flag.FlagSet, *setupoptions.Options)
	// ValidateFlags, when set, says what is wrong with the kind's own
	// flags, naming each; the manager refuses to start on it.
	ValidateFlags func(setupoptions.Options) error
}

// controllers lists every controller Deckhand can run, in start order: the
// four kinds below, then each kind that registers itself from its own file
// of this package (controller_<kind>.go, which hack/newkind writes), in the
// order of those files' names (docs/development/architecture.md has the
// checklist).
var controllers = []Controller{
	{
		Name:            podsetcontroller.ControllerName,
		AddToScheme:     versions(appsv1beta1.AddToScheme, appsv1alpha1.AddToScheme),
		Setup:           podsetcontroller.Setup,
		SetupWebhooks:   appswebhook.Setup,
		SetupConversion: appswebhook.SetupConversion,
		Needs:           podsetcontroller.Needs,
		SlimPod:         podsetcontroller.SlimPod,
	},
	{
		Name:          modelboxcontroller.ControllerName,
		AddToScheme:   modelv1.AddToScheme,
		Setup:         modelboxcontroller.Setup,
		CacheByObject: modelboxcontroller.CacheByObject,
	},
	{
		Name:          jobwatchercontroller.ControllerName,
		AddToScheme:   deckhandbatchv1.AddToScheme,
		Setup:         jobwatchercontroller.Setup,
		SetupWebhooks: batchwebhook.Setup,
		CacheByObject: jobwatchercontroller.CacheByObject,
		Needs:         jobwatchercontroller.Needs,
		BindFlags:     jobwatchercontroller.BindFlags,
	},
	{
		Name:            podbuggercontroller.ControllerName,
		AddToScheme:     versions(debugv1beta1.AddToScheme, debugv1alpha1.AddToScheme),
		Setup:           podbuggercontroller.Setup,
		SetupWebhooks:   debugwebhook.Setup,
		SetupConversion: debugwebhook.SetupConversion,
		CacheByObject:   podbuggercontroller.CacheByObject,
		Needs:           podbuggercontroller.Needs,
		SlimPod:         podbuggercontroller.SlimPod,
		BindFlags:       podbuggercontroller.BindFlags,
		ValidateFlags:   podbuggercontroller.ValidateFlags,
	},
}

// register adds a kind's entry to the registry. A kind calls it from an
// init function of its own file in this package, so that adding a kind
// edits no list of kinds.
func register(c Controller) {
	if slices.ContainsFunc(controllers, func(known Controller) bool { return known.Name == c.Name }) {
		panic("controller " + c.Name + " registered twice")
	}
	controllers = append(controllers, c)
}

// versions registers every version of an API group.
func versions(addToScheme ...func(*runtime.Scheme) error) func(*runtime.Scheme) error {
	b := runtime.NewSchemeBuilder(addToScheme...)
	return b.AddToScheme
}

// ConvertedCRDs are the CRDs served in more than one version, whose
// conversion webhook's caBundle the self-signed mode keeps at its CA (the
// RBAC for it, in internal/webhookcert, names them too): those of the kinds
// of every entry with SetupConversion that have a version converting to
// their hub. hack/kindcheck checks them against the CRDs in config/crd.
func ConvertedCRDs() []string {
	var out []string
	for _, c := range controllers {
		if c.SetupConversion == nil {
			continue
		}
		s := runtime.NewScheme()
		if err := c.AddToScheme(s); err != nil {
			panic(fmt.Sprintf("registering the API of controller %s: %v", c.Name, err))
		}
		for gvk, typ := range s.AllKnownTypes() {
			if _, ok := reflect.New(typ).Interface().(conversion.Convertible); !ok {
				continue
			}
			plural, _ := meta.UnsafeGuessKindToResource(gvk)
			if name := plural.Resource + "." + gvk.Group; !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// Registry returns a copy of the registry of controllers, for checks
// (hack/kindcheck).
func Registry() []Controller {
	return slices.Clone(controllers)
}

// KnownControllers returns the names --controllers accepts.
func KnownControllers() []string {
	names := make([]string, 0, len(controllers))
	for _, c := range controllers {
		names = append(names, c.Name)
	}
	return names
}
