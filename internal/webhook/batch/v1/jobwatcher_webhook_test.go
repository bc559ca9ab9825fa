package v1

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	jobwatcherpolicy "github.com/deckhand-dev/deckhand/internal/controller/jobwatcher/policy"
)

func TestValidateClusterJobWatcher(t *testing.T) {
	valid := func() deckhandbatchv1.ClusterJobWatcherSpec {
		return deckhandbatchv1.ClusterJobWatcherSpec{JobPolicy: deckhandbatchv1.JobPolicy{TTLSecondsAfterSucceeded: ptr.To[int32](600)}}
	}
	tests := map[string]struct {
		mutate func(*deckhandbatchv1.ClusterJobWatcherSpec)
		// want holds one "field: detail substring" per expected error.
		want []string
	}{
		"valid":             {func(*deckhandbatchv1.ClusterJobWatcherSpec) {}, nil},
		"zero TTL is valid": {func(s *deckhandbatchv1.ClusterJobWatcherSpec) { s.TTLSecondsAfterSucceeded = ptr.To[int32](0) }, nil},
		"only the failed TTL": {func(s *deckhandbatchv1.ClusterJobWatcherSpec) {
			s.TTLSecondsAfterSucceeded, s.TTLSecondsAfterFailed = nil, ptr.To[int32](1)
		}, nil},
		"every pattern valid": {func(s *deckhandbatchv1.ClusterJobWatcherSpec) {
			s.JobNamePatterns, s.ExcludeJobNamePatterns = []string{"pi-.*"}, []string{"keep"}
			s.NamespacePatterns, s.ExcludeNamespacePatterns = []string{"team-[a-z]+"}, []string{"kube-.*"}
		}, nil},
		"bad job name pattern": {func(s *deckhandbatchv1.ClusterJobWatcherSpec) { s.JobNamePatterns = []string{"ok", "([a-z"} },
			[]string{"spec.jobNamePatterns[1]: error parsing regexp: missing closing ]"}},
		"every bad pattern, each named": {func(s *deckhandbatchv1.ClusterJobWatcherSpec) {
			s.ExcludeJobNamePatterns = []string{"a(b"}
			s.NamespacePatterns = []string{"*x"}
			s.ExcludeNamespacePatterns = []string{"ok", `\8`}
		}, []string{
			"spec.excludeJobNamePatterns[0]: error parsing regexp: missing closing )",
			"spec.namespacePatterns[0]: error parsing regexp: missing argument to repetition operator",
			`spec.excludeNamespacePatterns[1]: error parsing regexp: invalid escape sequence`,
		}},
		// The regex bomb: 1,023 bytes that compile to a million
		// instructions, hundreds of MB, in the manager.
		"regex bomb": {func(s *deckhandbatchv1.ClusterJobWatcherSpec) {
			s.NamespacePatterns = []string{"team-.*", "(?:" + strings.Repeat("a", 1013) + "){1000}"}
		}, []string{"spec.namespacePatterns[1]: compiles to more than 2048 instructions"}},
		"patterns too large together": {func(s *deckhandbatchv1.ClusterJobWatcherSpec) {
			s.JobNamePatterns = slices.Repeat([]string{strings.Repeat("a", 1000)}, 8)
			s.ExcludeNamespacePatterns = []string{strings.Repeat("b", 1000)}
		}, []string{"spec.excludeNamespacePatterns[0]: the watcher's patterns compile to more than 8192 instructions"}},
		"bad selector": {func(s *deckhandbatchv1.ClusterJobWatcherSpec) {
			s.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}
		}, []string{`spec.selector.matchExpressions[0].operator: not a valid selector operator`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := &deckhandbatchv1.ClusterJobWatcher{Spec: valid()}
			tc.mutate(&w.Spec)
			errs := ValidateClusterJobWatcher(w)
			if len(errs) != len(tc.want) {
				t.Fatalf("got %d errors, want %d: %v", len(errs), len(tc.want), errs)
			}
			for i, want := range tc.want {
				field, detail, _ := strings.Cut(want, ": ")
				if errs[i].Field != field || !strings.Contains(errs[i].Detail, detail) {
					t.Errorf("error %d = %s: %s, want %s: …%s…", i, errs[i].Field, errs[i].Detail, field, detail)
				}
			}
		})
	}
}

func TestInvalidNamesTheKind(t *testing.T) {
	w := &deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "w"}}
	w.Spec.TTLSecondsAfterFailed = ptr.To[int32](1)
	w.Spec.JobNamePatterns = []string{"([a-z"}
	_, err := jobWatcherValidator{}.ValidateCreate(reviewFor("team"), w)
	if err == nil || !strings.Contains(err.Error(), `JobWatcher.batch.deckhand.dev "w" is invalid: spec.jobNamePatterns[0]`) {
		t.Fatalf("error = %v", err)
	}
	w.Spec.JobNamePatterns = nil
	if _, err := (jobWatcherValidator{}).ValidateUpdate(reviewFor("team"), w, w); err != nil {
		t.Fatalf("valid watcher refused: %v", err)
	}
}

// FuzzValidatePatterns checks that a pattern passes validation exactly when
// the controller's compile function (jobwatcherpolicy.CompilePattern) accepts
// it, so that the controller never meets a watcher it cannot compile, and
// that this is exactly when Go's RE2 compiles the pattern as written into a
// program within the bounds.
func FuzzValidatePatterns(f *testing.F) {
	for _, s := range []string{"pi-.*", "([a-z", `\8`, "a{2,1}", "(?i)team-[0-9]+", "x**"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, pattern string) {
		spec := deckhandbatchv1.JobPolicy{TTLSecondsAfterFailed: ptr.To[int32](1), JobNamePatterns: []string{pattern}}
		errs := ValidateJobPolicy(&spec, nil)
		_, compileErr := jobwatcherpolicy.CompilePattern(pattern)
		if (len(errs) == 0) != (compileErr == nil) {
			t.Fatalf("pattern %q: validation %v, controller's compile %v", pattern, errs, compileErr)
		}
		_, err := regexp.Compile(pattern)
		cost, _ := jobwatcherpolicy.PatternCost(pattern)
		within := cost.Program <= jobwatcherpolicy.MaxPatternProgram && cost.Runes <= jobwatcherpolicy.MaxPatternRunes
		if (err == nil && within) != (compileErr == nil) {
			t.Fatalf("pattern %q: RE2 %v, cost %+v, controller's compile %v", pattern, err, cost, compileErr)
		}
	})
}
