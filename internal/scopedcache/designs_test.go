package scopedcache

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

// The designs the switch chooses between are reachable through Options:
// the zero value switches at ClusterWideAbove, a negative ClusterWideAbove
// holds pods cluster-wide for one needed namespace, math.MaxInt per
// namespace for 17; each handler is told what the apiserver holds.
func TestTheDesignsAreReachableThroughOptions(t *testing.T) {
	tests := map[string]struct {
		o               Options
		needed          int
		wantClusterWide bool
	}{
		"the switch, below":    {o: Options{}, needed: 1},
		"the switch, above":    {o: Options{}, needed: ClusterWideAbove + 1, wantClusterWide: true},
		"always cluster-wide":  {o: Options{ClusterWideAbove: -1}, needed: 1, wantClusterWide: true},
		"always per namespace": {o: Options{ClusterWideAbove: math.MaxInt}, needed: ClusterWideAbove + 1},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			pods := map[string]int{}
			needs := make([]string, 0, tt.needed)
			for i := range tt.needed {
				pods[nsName(i)] = 2
				needs = append(needs, nsName(i))
			}
			pods[nsName(tt.needed)] = 2 // a namespace nothing needs
			s := newScriptWith(t, tt.o, pods, needs, nil)
			s.eventually(t, "the design's informers", func() error {
				namespaces, clusterWide := s.c.Namespaces(s.k.obj)
				if clusterWide != tt.wantClusterWide {
					return fmt.Errorf("cluster-wide: %v, want %v (own informers: %v)", clusterWide, tt.wantClusterWide, namespaces)
				}
				if !clusterWide && !slices.Equal(namespaces, needs) {
					return fmt.Errorf("informers of %v, want %v", namespaces, needs)
				}
				return s.converged()
			})
		})
	}
}

func TestOptionsRefuseThresholdsThatCross(t *testing.T) {
	tests := map[string]struct {
		o       Options
		wantErr bool
	}{
		"zero":                     {o: Options{}},
		"always per namespace":     {o: Options{ClusterWideAbove: math.MaxInt}},
		"back above going":         {o: Options{PerNamespaceAtMost: ClusterWideAbove}, wantErr: true},
		"cluster-wide, never back": {o: Options{ClusterWideAbove: -1}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := tt.o.thresholds()
			if (err != nil) != tt.wantErr {
				t.Fatalf("thresholds of %+v: %v, want an error: %v", tt.o, err, tt.wantErr)
			}
		})
	}
}
