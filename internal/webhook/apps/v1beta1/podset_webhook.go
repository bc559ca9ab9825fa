// Package v1beta1 validates PodSets at admission: it refuses a template a
// PodSet cannot keep, naming the field, before any pod is tried.
//
// The template is checked exactly as the apiserver checks a pod: the
// webhook builds the pod the PodSet would create and sends it as a
// server-side dry-run create. That runs the apiserver's own pod validation
// of this cluster's version (and its validating admission), so the webhook
// never drifts from Kubernetes the way a copy of its rules would. The
// errors come back with pod field paths, mapped here to spec.template.*.
// Two rules are the PodSet's own, as they are the ReplicaSet's:
// restartPolicy must be Always and activeDeadlineSeconds is refused; the
// schema's CEL rules state them too (and that every container has an
// image), so they hold even while the webhook is unreachable.
//
// The webhook is registered for v1beta1, the stored version, with
// matchPolicy Equivalent: a PodSet written as v1alpha1 reaches it converted
// to v1beta1, and spec.template, the only field it checks, has the same path
// in both versions.
package v1beta1

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	podsetcontroller "github.com/deckhand-dev/deckhand/internal/controller/podset"
	"github.com/deckhand-dev/deckhand/internal/setupoptions"
	"github.com/deckhand-dev/deckhand/internal/webhook/review"
)

// SetupConversion registers the PodSet conversion webhook (/convert): v1beta1
// is the hub, and every other version converts to and from it with its
// ConvertTo and ConvertFrom. The CRD calls it for every request in a version
// other than the stored one.
func SetupConversion(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &appsv1beta1.PodSet{}).Complete()
}

// Setup registers the PodSet validating webhook.
func Setup(mgr ctrl.Manager, _ setupoptions.Options) error {
	return ctrl.NewWebhookManagedBy(mgr, &appsv1beta1.PodSet{}).
		WithValidator(&Validator{Client: mgr.GetClient()}).Complete()
}

// The failure policy is Ignore: the schema's CEL rules already refuse the
// templates a PodSet can never keep, and a PodSet admitted while Deckhand is
// down only waits for its controller, which reports a refused pod in the
// ReplicaFailure condition. With Fail, PodSets could not be written at all
// while the manager (or its podset controller) is off.
// +kubebuilder:webhook:path=/validate-apps-deckhand-dev-v1beta1-podset,mutating=false,failurePolicy=ignore,matchPolicy=Equivalent,timeoutSeconds=10,sideEffects=None,groups=apps.deckhand.dev,resources=podsets,verbs=create;update,versions=v1beta1,name=vpodset-v1beta1.apps.deckhand.dev,admissionReviewVersions=v1

// The dry-run create of the pod a PodSet would make.
// +kubebuilder:rbac:groups="",resources=pods,verbs=create

// Validator checks PodSets on create and on template changes.
type Validator struct {
	// Client sends the dry-run pod creations.
	Client client.Client
}

// ValidateCreate refuses a PodSet whose pods would be refused.
func (v *Validator) ValidateCreate(ctx context.Context, set *appsv1beta1.PodSet) (admission.Warnings, error) {
	return v.validate(ctx, set)
}

// ValidateUpdate checks the template again when it changed; other updates
// (metadata, size) pass, so a PodSet admitted by an older Kubernetes can
// still be scaled.
func (v *Validator) ValidateUpdate(ctx context.Context, old, set *appsv1beta1.PodSet) (admission.Warnings, error) {
	if equality.Semantic.DeepEqual(old.Spec.Template, set.Spec.Template) {
		return nil, nil
	}
	return v.validate(ctx, set)
}

// ValidateDelete allows every deletion.
func (v *Validator) ValidateDelete(context.Context, *appsv1beta1.PodSet) (admission.Warnings, error) {
	return nil, nil
}

func (v *Validator) validate(ctx context.Context, set *appsv1beta1.PodSet) (admission.Warnings, error) {
	if err := review.SameNamespace(ctx, appsv1beta1.GroupVersion.WithKind("PodSet").GroupKind(), true, set); err != nil {
		return nil, err
	}
	errs := ValidateTemplate(set)
	pod := podsetcontroller.PodFor(set)
	// A new PodSet has no UID yet; the owner reference is not what is
	// being checked.
	pod.OwnerReferences = nil
	var warnings admission.Warnings
	if err := v.Client.Create(ctx, pod, client.DryRunAll); err != nil {
		var status apierrors.APIStatus
		switch {
		case apierrors.IsInvalid(err) && errors.As(err, &status):
			errs = append(errs, TemplateErrors(status.Status().Details)...)
		default:
			// Refused for what may change (a quota, Pod Security labels of
			// the namespace, another webhook) or not checked at all: the
			// PodSet is admitted and reports the refusal itself.
			warnings = append(warnings, fmt.Sprintf("a pod of this PodSet would not be created now: %v", err))
		}
	}
	if len(errs) == 0 {
		return warnings, nil
	}
	return warnings, apierrors.NewInvalid(appsv1beta1.GroupVersion.WithKind("PodSet").GroupKind(), set.Name, dedupe(errs))
}

// ValidateTemplate returns the PodSet's own rules a template breaks, as a
// ReplicaSet's: its pods must restart in place (restartPolicy Always) and
// must not end on a deadline (activeDeadlineSeconds), or the PodSet would
// replace them forever.
func ValidateTemplate(set *appsv1beta1.PodSet) field.ErrorList {
	if set.Spec.Template == nil {
		return nil
	}
	spec := set.Spec.Template.Spec
	path := field.NewPath("spec", "template", "spec")
	var errs field.ErrorList
	if spec.RestartPolicy != "" && spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(path.Child("restartPolicy"), spec.RestartPolicy, []corev1.RestartPolicy{corev1.RestartPolicyAlways}))
	}
	if spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(path.Child("activeDeadlineSeconds"), "a PodSet's pods run until they are replaced"))
	}
	return errs
}

// TemplateErrors turns the field causes of a refused pod into errors on the
// PodSet's template: metadata.* becomes spec.template.metadata.* and
// spec.* becomes spec.template.spec.*.
func TemplateErrors(details *metav1.StatusDetails) field.ErrorList {
	if details == nil {
		return nil
	}
	var errs field.ErrorList
	for _, c := range details.Causes {
		path := c.Field
		if strings.HasPrefix(path, "spec") || strings.HasPrefix(path, "metadata") {
			path = "spec.template." + path
		}
		errs = append(errs, &field.Error{Type: field.ErrorType(c.Type), Field: path, BadValue: field.OmitValueType{}, Detail: causeDetail(c)})
	}
	return errs
}

// causeDetail is the cause's message without the error type it starts with
// (field.Error prints the type itself).
func causeDetail(c metav1.StatusCause) string {
	msg := c.Message
	if t := field.ErrorType(c.Type).String(); strings.HasPrefix(msg, t) {
		msg = strings.TrimPrefix(strings.TrimPrefix(msg, t), ": ")
	}
	return msg
}

// dedupe drops errors that repeat an earlier one's field and type: the
// PodSet's own rules and the dry-run may both find the same problem.
func dedupe(errs field.ErrorList) field.ErrorList {
	seen := map[string]bool{}
	var out field.ErrorList
	for _, e := range errs {
		if k := e.Field + "|" + string(e.Type); !seen[k] {
			seen[k] = true
			out = append(out, e)
		}
	}
	return out
}
