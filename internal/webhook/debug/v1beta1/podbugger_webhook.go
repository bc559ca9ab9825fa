// Package v1beta1 holds the admission webhook of debug.deckhand.dev: it
// refuses a PodBugger that breaks PodBugger's safety policy (package
// internal/controller/podbugger/policy, which the controller enforces too).
//
// It is registered for v1beta1, the stored version, with matchPolicy
// Equivalent: the apiserver converts a PodBugger written as v1alpha1 to
// v1beta1 (through the conversion webhook) before it calls this one, so
// both versions get the same checks. The fields checked (metadata.namespace,
// spec.selector, spec.image, spec.profile) have the same paths in both.
package v1beta1

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/policy"
	"github.com/deckhand-dev/deckhand/internal/setupoptions"
	"github.com/deckhand-dev/deckhand/internal/webhook/review"
)

// +kubebuilder:webhook:path=/validate-debug-deckhand-dev-v1beta1-podbugger,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,sideEffects=None,groups=debug.deckhand.dev,resources=podbuggers,verbs=create;update,versions=v1beta1,name=vpodbugger-v1beta1.debug.deckhand.dev,admissionReviewVersions=v1

// SetupConversion registers the PodBugger conversion webhook (/convert): v1beta1
// is the hub, and every other version converts to and from it with its
// ConvertTo and ConvertFrom. The CRD calls it for every request in a version
// other than the stored one.
func SetupConversion(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &debugv1beta1.PodBugger{}).Complete()
}

// Setup registers the PodBugger validating webhook. It reads namespaces
// straight from the apiserver, so a namespace labelled a moment ago is seen.
func Setup(mgr ctrl.Manager, opts setupoptions.Options) error {
	p, err := policy.From(opts)
	if err != nil {
		return err
	}
	return ctrl.NewWebhookManagedBy(mgr, &debugv1beta1.PodBugger{}).
		WithValidator(&PodBuggerValidator{Reader: mgr.GetAPIReader(), Policy: p}).
		Complete()
}

// PodBuggerValidator refuses PodBuggers that break the operator's policy or
// live in a namespace that has not opted in.
type PodBuggerValidator struct {
	// Reader reads the PodBugger's namespace.
	Reader client.Reader
	// Policy is what the operator allows.
	Policy policy.Policy
}

var _ admission.Validator[*debugv1beta1.PodBugger] = &PodBuggerValidator{}

// ValidateCreate checks a new PodBugger.
func (v *PodBuggerValidator) ValidateCreate(ctx context.Context, pb *debugv1beta1.PodBugger) (admission.Warnings, error) {
	return nil, v.validate(ctx, pb)
}

// ValidateUpdate checks a PodBugger whose spec changes. An update that
// leaves the spec alone (labels, annotations) is allowed even if the policy
// has since become stricter: the controller blocks such a PodBugger anyway.
func (v *PodBuggerValidator) ValidateUpdate(ctx context.Context, oldPB, newPB *debugv1beta1.PodBugger) (admission.Warnings, error) {
	if equality.Semantic.DeepEqual(oldPB.Spec, newPB.Spec) {
		return nil, nil
	}
	return nil, v.validate(ctx, newPB)
}

// ValidateDelete allows every deletion.
func (v *PodBuggerValidator) ValidateDelete(context.Context, *debugv1beta1.PodBugger) (admission.Warnings, error) {
	return nil, nil
}

func (v *PodBuggerValidator) validate(ctx context.Context, pb *debugv1beta1.PodBugger) error {
	if err := review.SameNamespace(ctx, debugv1beta1.GroupVersion.WithKind("PodBugger").GroupKind(), true, pb); err != nil {
		return err
	}
	ns := &corev1.Namespace{}
	if err := v.Reader.Get(ctx, client.ObjectKey{Name: pb.Namespace}, ns); err != nil {
		return apierrors.NewInternalError(fmt.Errorf("reading namespace %s: %w", pb.Namespace, err))
	}
	errs := ValidatePodBugger(pb, ns.Labels, v.Policy)
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(debugv1beta1.GroupVersion.WithKind("PodBugger").GroupKind(), pb.Name, errs)
}

// ValidatePodBugger returns every problem of pb, each naming its field: what
// the schema cannot say about the selector, the policy's rules, and the
// redaction patterns that do not compile within their bounds.
func ValidatePodBugger(pb *debugv1beta1.PodBugger, namespaceLabels map[string]string, p policy.Policy) field.ErrorList {
	errs := metav1validation.ValidateLabelSelector(&pb.Spec.Selector,
		metav1validation.LabelSelectorValidationOptions{}, field.NewPath("spec", "selector"))
	for _, violation := range p.Violations(pb, namespaceLabels) {
		errs = append(errs, violation.Err)
	}
	_, patternErrs := policy.RedactPatterns(pb)
	errs = append(errs, patternErrs...)
	return append(errs, policy.ArtifactsErrors(pb)...)
}
