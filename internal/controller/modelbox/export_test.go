package modelbox

import (
	"k8s.io/apimachinery/pkg/runtime"

	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
)

// ChildrenFor exposes the builders to the envtest tests: the children box
// wants when its Deployment runs current replicas (nil: none yet), as apply
// configurations; absent children are left out.
func ChildrenFor(box *modelv1.ModelBox, current *int32) ([]runtime.ApplyConfiguration, error) {
	want, err := desiredFor(box, current)
	if err != nil {
		return nil, err
	}
	var out []runtime.ApplyConfiguration
	for _, ac := range []runtime.ApplyConfiguration{
		orNil[runtime.ApplyConfiguration](want.deployment), orNil[runtime.ApplyConfiguration](want.service),
		orNil[runtime.ApplyConfiguration](want.hpa), orNil[runtime.ApplyConfiguration](want.pdb),
	} {
		if ac != nil {
			out = append(out, ac)
		}
	}
	return out, nil
}

// SetUID exposes setUID to the tests.
var SetUID = setUID

// FullComparisons is how many times r read the fields Deckhand owns out of
// a child to compare them with what it wants.
func FullComparisons(r *ModelBoxReconciler) int64 { return r.verified.compared.Load() }

// FingerprintsOf exposes fingerprintsOf to the tests.
var FingerprintsOf = fingerprintsOf
