package podbugger_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	debugv1alpha1 "github.com/deckhand-dev/deckhand/api/debug/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/podbuggertest"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// TestSchemaBoundsCommandAndArgs: what a PodBugger runs is copied into every
// pod it debugs, so its size is bounded at the schema, in both served
// versions, and a refusal names the field.
func TestSchemaBoundsCommandAndArgs(t *testing.T) {
	ns := podbuggertest.EnabledNamespace(t, env)
	env.StartManager(t, podbuggertest.Options(env)) // the webhooks, and conversion of v1alpha1
	tests := map[string]struct {
		command, args []string
		want          string // a regexp the refusal matches; "" for admitted
	}{
		"a script in args":      {command: []string{"sh", "-c"}, args: []string{strings.Repeat("x", 4096)}},
		"a long command item":   {command: []string{strings.Repeat("x", 1025)}, want: `spec\.command\[0\]: Too long: may not be more than 1024`},
		"a long args item":      {args: []string{"ok", strings.Repeat("x", 4097)}, want: `spec\.args\[1\]: Too long: may not be more than 4096`},
		"too much all together": {command: []string{"sh"}, args: []string{strings.Repeat("x", 4096), strings.Repeat("x", 4096), strings.Repeat("x", 4096), strings.Repeat("x", 4096)}, want: `spec\.args: Invalid value: ("object": )?command and args together must be at most 16384 characters`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := testenv.NewG(t)
			pb := podbuggertest.PodBugger(ns, "pb", podbuggertest.Web)
			pb.GenerateName, pb.Name = "pb-", ""
			pb.Spec.Command, pb.Spec.Args = tc.command, tc.args
			old := &debugv1alpha1.PodBugger{}
			g.Expect(old.ConvertFrom(pb)).To(Succeed())
			for version, err := range map[string]error{
				"v1beta1":  env.Client.Create(ctx, pb),
				"v1alpha1": env.Client.Create(ctx, old),
			} {
				if tc.want == "" {
					g.Expect(err).NotTo(HaveOccurred(), version)
				} else {
					// Kubernetes 1.34 renders a CEL refusal's value as
					// "object", 1.35 and later leave it out (make test-compat).
					g.Expect(err).To(MatchError(MatchRegexp(tc.want)), version)
				}
			}
		})
	}
}
