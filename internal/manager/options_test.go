package manager_test

import (
	"flag"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/deckhand-dev/deckhand/internal/manager"
)

// Leader-election timings client-go would refuse at start are refused by
// the flags' validation, naming the flag: a renew deadline must hold a
// retry period and its jitter (1.2 times it), not just be longer than it.
func TestLeaderElectionTimingsClientGoRefusesAreRefusedByName(t *testing.T) {
	parse := func(args ...string) error {
		var o manager.Options
		fs := flag.NewFlagSet("deckhand", flag.ContinueOnError)
		o.BindFlags(fs)
		if err := fs.Parse(append([]string{"--leader-elect", "--namespace", "deckhand-system"}, args...)); err != nil {
			return err
		}
		return o.Validate()
	}
	g := NewWithT(t)
	g.Expect(parse()).To(Succeed(), "the shipped timings")
	g.Expect(parse("--leader-elect-retry-period", "8s")).To(Succeed(), "8 s and its jitter fit in the 10 s deadline")
	err := parse("--leader-elect-retry-period", "9s")
	g.Expect(err).To(MatchError(ContainSubstring("--leader-elect-retry-period (9s) must be shorter than --leader-elect-renew-deadline (10s)")))
	err = parse("--leader-elect-renew-deadline", "16s")
	g.Expect(err).To(MatchError(ContainSubstring("--leader-elect-renew-deadline (16s) must be shorter than --leader-elect-lease-duration (15s)")))
}

// A kind's own flags are checked by its registry entry's ValidateFlags: an
// allow-list regular expression that does not compile stops the manager,
// naming the flag.
func TestAKindsBadFlagIsRefusedByName(t *testing.T) {
	var o manager.Options
	fs := flag.NewFlagSet("deckhand", flag.ContinueOnError)
	o.BindFlags(fs)
	g := NewWithT(t)
	g.Expect(fs.Parse([]string{"--namespace", "deckhand-system", "--podbugger-allowed-images", "re:busybox(:"})).To(Succeed())
	g.Expect(o.Validate()).To(MatchError(ContainSubstring("--podbugger-allowed-images")))
}
