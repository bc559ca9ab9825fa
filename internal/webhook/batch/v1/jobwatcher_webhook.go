// Package v1 validates JobWatchers and ClusterJobWatchers at admission: only
// what the CRD schema cannot check (the TTLs are the schema's), that every
// regex compiles, within the bounds on its compiled size, with the
// controller's own compile function, and that the selector is well formed.
package v1

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	jobwatcherpolicy "github.com/deckhand-dev/deckhand/internal/controller/jobwatcher/policy"
	"github.com/deckhand-dev/deckhand/internal/setupoptions"
	"github.com/deckhand-dev/deckhand/internal/webhook/review"
)

// Setup registers the validating webhooks of both kinds.
func Setup(mgr ctrl.Manager, _ setupoptions.Options) error {
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

func (jobWatcherValidator) ValidateCreate(ctx context.Context, w *deckhandbatchv1.JobWatcher) (admission.Warnings, error) {
	return nil, validateJobWatcherReview(ctx, w)
}

func (jobWatcherValidator) ValidateUpdate(ctx context.Context, _, w *deckhandbatchv1.JobWatcher) (admission.Warnings, error) {
	return nil, validateJobWatcherReview(ctx, w)
}

func validateJobWatcherReview(ctx context.Context, w *deckhandbatchv1.JobWatcher) error {
	if err := review.SameNamespace(ctx, deckhandbatchv1.GroupVersion.WithKind("JobWatcher").GroupKind(), true, w); err != nil {
		return err
	}
	return invalid("JobWatcher", w.Name, ValidateJobWatcher(w))
}

func (jobWatcherValidator) ValidateDelete(context.Context, *deckhandbatchv1.JobWatcher) (admission.Warnings, error) {
	return nil, nil
}

type clusterJobWatcherValidator struct{}

func (clusterJobWatcherValidator) ValidateCreate(ctx context.Context, w *deckhandbatchv1.ClusterJobWatcher) (admission.Warnings, error) {
	return nil, validateClusterJobWatcherReview(ctx, w)
}

func (clusterJobWatcherValidator) ValidateUpdate(ctx context.Context, _, w *deckhandbatchv1.ClusterJobWatcher) (admission.Warnings, error) {
	return nil, validateClusterJobWatcherReview(ctx, w)
}

func validateClusterJobWatcherReview(ctx context.Context, w *deckhandbatchv1.ClusterJobWatcher) error {
	if err := review.SameNamespace(ctx, deckhandbatchv1.GroupVersion.WithKind("ClusterJobWatcher").GroupKind(), false, w); err != nil {
		return err
	}
	return invalid("ClusterJobWatcher", w.Name, ValidateClusterJobWatcher(w))
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
	errs := validatePatterns(spec, jobwatcherpolicy.WatcherPatterns(&w.Spec.JobPolicy, w.Spec.NamespacePatterns, w.Spec.ExcludeNamespacePatterns))
	return append(errs, validateSelector(&w.Spec.JobPolicy, spec)...)
}

// ValidateJobPolicy returns every problem with p, found at path, that the
// schema cannot find: regexes that do not compile or compile too large, a
// malformed selector. (That the TTLs are non-negative and not both missing
// is the schema's.)
func ValidateJobPolicy(p *deckhandbatchv1.JobPolicy, path *field.Path) field.ErrorList {
	errs := validatePatterns(path, jobwatcherpolicy.WatcherPatterns(p, nil, nil))
	return append(errs, validateSelector(p, path)...)
}

func validateSelector(p *deckhandbatchv1.JobPolicy, path *field.Path) field.ErrorList {
	if p.Selector == nil {
		return nil
	}
	return metav1validation.ValidateLabelSelector(p.Selector,
		metav1validation.LabelSelectorValidationOptions{}, path.Child("selector"))
}

// validatePatterns compiles the watcher's RE2 patterns as the controller
// does and reports the ones it refuses, with the compiler's message or the
// bound they exceed. Lists longer, or patterns longer, than the schema
// allows are refused before anything is parsed: a review written by hand
// to the webhook port has met no schema.
func validatePatterns(path *field.Path, lists []jobwatcherpolicy.PatternList) field.ErrorList {
	if errs := patternListBounds(path, lists); len(errs) > 0 {
		return errs
	}
	_, perrs := jobwatcherpolicy.CompilePatterns(lists...)
	errs := make(field.ErrorList, 0, len(perrs))
	for _, e := range perrs {
		errs = append(errs, field.Invalid(path.Child(e.Field).Index(e.Index), e.Pattern, e.Err.Error()))
	}
	return errs
}

// The schema's bounds on a watcher's pattern lists (MaxItems, MaxLength).
const (
	maxPatterns     = 64
	maxPatternBytes = 1024
)

// patternListBounds reports the lists of lists that break the schema's
// bounds, reading only their lengths.
func patternListBounds(path *field.Path, lists []jobwatcherpolicy.PatternList) field.ErrorList {
	var errs field.ErrorList
	for _, l := range lists {
		if len(l.Patterns) > maxPatterns {
			errs = append(errs, field.TooMany(path.Child(l.Field), len(l.Patterns), maxPatterns))
			continue
		}
		for i, p := range l.Patterns {
			if len(p) > maxPatternBytes {
				errs = append(errs, field.TooLong(path.Child(l.Field).Index(i), "", maxPatternBytes))
			}
		}
	}
	return errs
}
