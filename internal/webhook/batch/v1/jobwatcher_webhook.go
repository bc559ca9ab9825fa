// Package v1 validates JobWatchers and ClusterJobWatchers at admission: the
// checks the CRD schema cannot make, above all that every regex compiles.
package v1

import (
	"context"
	"regexp"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	"github.com/deckhand-dev/deckhand/internal/setup"
)

// Setup registers the validating webhooks of both kinds.
func Setup(mgr ctrl.Manager, _ setup.Options) error {
	if err := ctrl.NewWebhookManagedBy(mgr, &deckhandbatchv1.JobWatcher{}).
		WithValidator(jobWatcherValidator{}).Complete(); err != nil {
		return err
	}
	return ctrl.NewWebhookManagedBy(mgr, &deckhandbatchv1.ClusterJobWatcher{}).
		WithValidator(clusterJobWatcherValidator{}).Complete()
}

// +kubebuilder:webhook:path=/validate-batch-deckhand-dev-v1-jobwatcher,mutating=false,failurePolicy=fail,sideEffects=None,groups=batch.deckhand.dev,resources=jobwatchers,verbs=create;update,versions=v1,name=vjobwatcher-v1.batch.deckhand.dev,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-batch-deckhand-dev-v1-clusterjobwatcher,mutating=false,failurePolicy=fail,sideEffects=None,groups=batch.deckhand.dev,resources=clusterjobwatchers,verbs=create;update,versions=v1,name=vclusterjobwatcher-v1.batch.deckhand.dev,admissionReviewVersions=v1

type jobWatcherValidator struct{}

func (jobWatcherValidator) ValidateCreate(_ context.Context, w *deckhandbatchv1.JobWatcher) (admission.Warnings, error) {
	return nil, invalid("JobWatcher", w.Name, ValidateJobWatcher(w))
}

func (jobWatcherValidator) ValidateUpdate(_ context.Context, _, w *deckhandbatchv1.JobWatcher) (admission.Warnings, error) {
	return nil, invalid("JobWatcher", w.Name, ValidateJobWatcher(w))
}

func (jobWatcherValidator) ValidateDelete(context.Context, *deckhandbatchv1.JobWatcher) (admission.Warnings, error) {
	return nil, nil
}

type clusterJobWatcherValidator struct{}

func (clusterJobWatcherValidator) ValidateCreate(_ context.Context, w *deckhandbatchv1.ClusterJobWatcher) (admission.Warnings, error) {
	return nil, invalid("ClusterJobWatcher", w.Name, ValidateClusterJobWatcher(w))
}

func (clusterJobWatcherValidator) ValidateUpdate(_ context.Context, _, w *deckhandbatchv1.ClusterJobWatcher) (admission.Warnings, error) {
	return nil, invalid("ClusterJobWatcher", w.Name, ValidateClusterJobWatcher(w))
}

func (clusterJobWatcherValidator) ValidateDelete(context.Context, *deckhandbatchv1.ClusterJobWatcher) (admission.Warnings, error) {
	return nil, nil
}

func invalid(kind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: deckhandbatchv1.GroupVersion.Group, Kind: kind}, name, errs)
}

// ValidateJobWatcher returns every problem with a JobWatcher's spec.
func ValidateJobWatcher(w *deckhandbatchv1.JobWatcher) field.ErrorList {
	return ValidateJobPolicy(&w.Spec.JobPolicy, field.NewPath("spec"))
}

// ValidateClusterJobWatcher returns every problem with a ClusterJobWatcher's
// spec.
func ValidateClusterJobWatcher(w *deckhandbatchv1.ClusterJobWatcher) field.ErrorList {
	spec := field.NewPath("spec")
	errs := ValidateJobPolicy(&w.Spec.JobPolicy, spec)
	errs = append(errs, validatePatterns(w.Spec.NamespacePatterns, spec.Child("namespacePatterns"))...)
	return append(errs, validatePatterns(w.Spec.ExcludeNamespacePatterns, spec.Child("excludeNamespacePatterns"))...)
}

// ValidateJobPolicy returns every problem with p, found at path: TTLs that
// are negative or both missing, regexes that do not compile, a malformed
// selector.
func ValidateJobPolicy(p *deckhandbatchv1.JobPolicy, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if p.TTLSecondsAfterSucceeded == nil && p.TTLSecondsAfterFailed == nil {
		errs = append(errs, field.Required(path.Child("ttlSecondsAfterSucceeded"),
			"at least one of ttlSecondsAfterSucceeded and ttlSecondsAfterFailed must be set"))
	}
	for _, ttl := range []struct {
		name  string
		value *int32
	}{
		{"ttlSecondsAfterSucceeded", p.TTLSecondsAfterSucceeded},
		{"ttlSecondsAfterFailed", p.TTLSecondsAfterFailed},
	} {
		if ttl.value != nil && *ttl.value < 0 {
			errs = append(errs, field.Invalid(path.Child(ttl.name), *ttl.value, "must be non-negative"))
		}
	}
	errs = append(errs, validatePatterns(p.JobNamePatterns, path.Child("jobNamePatterns"))...)
	errs = append(errs, validatePatterns(p.ExcludeJobNamePatterns, path.Child("excludeJobNamePatterns"))...)
	if p.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(p.Selector,
			metav1validation.LabelSelectorValidationOptions{}, path.Child("selector"))...)
	}
	return errs
}

// validatePatterns compiles each RE2 pattern and reports the ones that fail
// with the compiler's message.
func validatePatterns(patterns []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, pat := range patterns {
		if _, err := regexp.Compile(pat); err != nil {
			errs = append(errs, field.Invalid(path.Index(i), pat, err.Error()))
		}
	}
	return errs
}
