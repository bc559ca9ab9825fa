// Package review holds what every Deckhand admission webhook checks before
// it does any work for a review. The webhook port answers whoever reaches
// it: the apiserver, and also any pod a NetworkPolicy lets through, with an
// AdmissionReview written by hand that no schema has checked. So each
// validator first refuses a review whose object is not in the namespace the
// review is for (SameNamespace), and bounds what it reads before it reads
// it (each kind's own limits, the schema's, checked again); the manager's
// webhook server caps every review's size, runs a few at a time and gives
// each a deadline (internal/manager).
package review

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// SameNamespace refuses a review whose object is not in the namespace the
// review is for (none for a cluster-scoped kind: namespaced says which
// the kind is, so an empty namespace passes only there). The apiserver always
// sends them equal; a review that says otherwise was written by hand, to
// make the manager act for a namespace its sender does not write in (a
// PodSet's dry-run probe, a PodBugger's read of namespace labels).
func SameNamespace(ctx context.Context, gk schema.GroupKind, namespaced bool, obj client.Object) error {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("no admission request: the %s webhook validates only admission reviews", gk.Kind))
	}
	if obj.GetNamespace() == req.Namespace && (req.Namespace != "") == namespaced {
		return nil
	}
	return apierrors.NewInvalid(gk, obj.GetName(), field.ErrorList{field.Invalid(field.NewPath("metadata", "namespace"), obj.GetNamespace(),
		fmt.Sprintf("the admission request is for namespace %q: a %s is checked only in its own namespace", req.Namespace, gk.Kind))})
}
