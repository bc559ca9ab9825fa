// Package convtest checks that a version of an API converts to its hub and
// back without losing anything, with random objects (the round-trip fuzz
// tests of Kubernetes and Cluster API's utilconversion.FuzzTestFunc). It is
// a pure unit test: no apiserver.
package convtest

import (
	"math/rand"
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/diff"
	"sigs.k8s.io/controller-runtime/pkg/conversion"
	"sigs.k8s.io/randfill"
)

// Iterations is how many random objects each direction tries.
const Iterations = 1000

// RoundTrip fills Iterations random spokes and hubs and checks both
// directions: spoke → hub → spoke and hub → spoke → hub give back what they
// started from (compared semantically: nil and empty maps and lists are
// equal). funcs add fuzzer functions for the kinds' own types, for example
// to keep a pod template small.
func RoundTrip[S conversion.Convertible, H conversion.Hub](t *testing.T, newSpoke func() S, newHub func() H, funcs ...any) {
	t.Helper()
	seed := rand.Int63()
	t.Logf("fuzzer seed %d", seed)
	f := filler(seed, funcs)
	t.Run("spoke-hub-spoke", func(t *testing.T) {
		for i := range Iterations {
			spoke := newSpoke()
			f.Fill(spoke)
			clearTypeMeta(spoke)
			hub := newHub()
			if err := spoke.ConvertTo(hub); err != nil {
				t.Fatalf("object %d: ConvertTo: %v", i, err)
			}
			back := newSpoke()
			if err := back.ConvertFrom(hub); err != nil {
				t.Fatalf("object %d: ConvertFrom: %v", i, err)
			}
			if !apiequality.Semantic.DeepEqual(spoke, back) {
				t.Fatalf("object %d changed on its way through the hub (- before, + after):\n%s", i, diff.Diff(spoke, back))
			}
		}
	})
	t.Run("hub-spoke-hub", func(t *testing.T) {
		for i := range Iterations {
			hub := newHub()
			f.Fill(hub)
			clearTypeMeta(hub)
			spoke := newSpoke()
			if err := spoke.ConvertFrom(hub); err != nil {
				t.Fatalf("object %d: ConvertFrom: %v", i, err)
			}
			back := newHub()
			if err := spoke.ConvertTo(back); err != nil {
				t.Fatalf("object %d: ConvertTo: %v", i, err)
			}
			if !apiequality.Semantic.DeepEqual(hub, back) {
				t.Fatalf("object %d changed on its way through the spoke (- before, + after):\n%s", i, diff.Diff(hub, back))
			}
		}
	})
}

// filler fills objects as Kubernetes' own API fuzz tests do (valid object
// metadata, times to the second, quantities), seeded so that a failure can
// be reproduced from the seed in the log.
func filler(seed int64, funcs []any) *randfill.Filler {
	extra := func(serializer.CodecFactory) []any { return funcs }
	f := fuzzer.FuzzerFor(fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, extra), rand.NewSource(seed),
		serializer.NewCodecFactory(runtime.NewScheme()))
	return f.NilChance(0.3).NumElements(0, 3)
}

// clearTypeMeta empties apiVersion and kind: the conversion webhook sets
// them, the conversion functions do not.
func clearTypeMeta(obj runtime.Object) {
	obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
}
