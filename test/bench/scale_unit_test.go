//go:build bench

package bench

import (
	"math"
	"slices"
	"testing"
)

// go test -tags bench -run 'TestSlope|TestParseSizes' ./test/bench runs
// these without a cluster.

func TestSlope(t *testing.T) {
	// 20 MiB at rest and 1,500 bytes an object, with noise either way.
	x := []float64{0, 1000, 10000, 100000}
	y := []float64{20 << 20, 20<<20 + 1.5e6 + 3e5, 20<<20 + 1.5e7 - 3e5, 20<<20 + 1.5e8}
	if got := slope(x, y); math.Abs(got-1500) > 10 {
		t.Errorf("slope = %g bytes an object, want about 1500", got)
	}
	if got := slope([]float64{0}, []float64{5}); got != 0 {
		t.Errorf("slope of one point = %g, want 0", got)
	}
}

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("1000, 10000,100000")
	if err != nil || !slices.Equal(got, []int{1000, 10000, 100000}) {
		t.Errorf("parseSizes = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "-5", "1e3", "2000000", "1000,,10"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("parseSizes(%q) took it", bad)
		}
	}
}
