package textdiff

import (
	"slices"
	"testing"
)

func TestLines(t *testing.T) {
	tests := map[string]struct {
		want, got string
		diff      []string
	}{
		"equal":           {want: "a\nb", got: "a\nb"},
		"moved":           {want: "a\nb", got: "b\na"},
		"added":           {want: "a", got: "a\nb", diff: []string{"+ b"}},
		"lost":            {want: "a\nb", got: "a", diff: []string{"- b"}},
		"changed":         {want: "verbs: get\nkind: Pod", got: "verbs: list\nkind: Pod", diff: []string{"- verbs: get", "+ verbs: list"}},
		"lost then added": {want: "x\ny", got: "z", diff: []string{"- x", "- y", "+ z"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Lines(tt.want, tt.got); !slices.Equal(got, tt.diff) {
				t.Errorf("Lines(%q, %q) = %q, want %q", tt.want, tt.got, got, tt.diff)
			}
		})
	}
}
