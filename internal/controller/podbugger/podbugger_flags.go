package podbugger

import (
	"flag"
	"fmt"
	"strings"

	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/policy"
	"github.com/deckhand-dev/deckhand/internal/notify"
	"github.com/deckhand-dev/deckhand/internal/setupoptions"
)

// BindFlags registers the PodBugger policy flags on fs, into o: the
// registry entry's BindFlags, which the manager's flags call. Each flag is
// named podbugger-…, and sets a PodBugger… field of setupoptions.Options.
func BindFlags(fs *flag.FlagSet, o *setupoptions.Options) {
	fs.Func("podbugger-allowed-images",
		"Images PodBuggers may run; repeatable. Each value is a comma-separated list of globs (path.Match: '*' does not cross '/', "+
			"e.g. 'docker.io/library/busybox:*'), or one Go regular expression prefixed with 're:' that must match the whole image. "+
			"Images and globs are compared in full ('busybox:1.36' is 'docker.io/library/busybox:1.36'); write a regular expression in full. "+
			"Empty allows no image.",
		func(v string) error {
			if strings.HasPrefix(v, policy.RegexpPrefix) {
				o.PodBuggerAllowedImages = append(o.PodBuggerAllowedImages, v)
			} else {
				o.PodBuggerAllowedImages = append(o.PodBuggerAllowedImages, setupoptions.SplitList(v)...)
			}
			return nil
		})
	fs.IntVar(&o.PodBuggerIncidentWritesPerMinute, "podbugger-incident-writes-per-minute", policy.DefaultIncidentWritesPerMinute,
		"How many PodIncidents (new ones, or a failure counted in one) each PodBugger writes in a minute, a sixth of them at once; "+
			"failures beyond it are recorded when the PodBugger's writes allow, as their pods then show them. 0 or less means the default.")
	fs.StringVar(&o.PodBuggerIncidentSinksFile, "podbugger-incident-sinks-file", "",
		"A YAML file of the sinks PodBuggers may name in spec.incidents.notify: a list 'sinks' of {name, format (JSON, Slack or CloudEvents), "+
			"url, token (optional, sent as a bearer token), namespaces (optional: the namespaces whose PodBuggers may name it)}. "+
			"Mount it from a Secret; it is read at start. Empty: no sinks.")
	fs.BoolVar(&o.PodBuggerRedactSecretEnv, "podbugger-redact-secret-env", true,
		"Read the Secrets a failing pod's environment takes values from (env secretKeyRef, envFrom secretRef; by name, past the cache, "+
			"at most 16 a failure) and remove those values wherever its PodIncident would keep them, in the namespaces where the manager "+
			"may get Secrets: a namespace's owner grants it by binding the deckhand-podbugger-secret-env ClusterRole there (the chart's "+
			"podBugger.secretEnv.clusterWide binds it everywhere). Elsewhere only the built-in detectors and the PodBugger's patterns apply.")
	fs.BoolVar(&o.PodBuggerAllowGeneralProfile, "podbugger-allow-general-profile", false,
		"Let PodBuggers use the general profile, which gives the debug container the SYS_PTRACE capability.")
	fs.BoolVar(&o.PodBuggerAllowHostAccess, "podbugger-allow-host-access", false,
		"Let PodBuggers inject into pods that reach into their node (hostPID, hostNetwork, hostIPC, privileged containers, hostPath volumes "+
			"or claims bound to hostPath or local PersistentVolumes, and with the general profile capabilities added beyond the baseline); "+
			"without it such pods are skipped, with an Event.")
}

// ValidateFlags says what is wrong with the PodBugger flags in o: an
// allow-list entry that does not compile, a sinks file that cannot be read.
func ValidateFlags(o setupoptions.Options) error {
	if _, err := policy.From(o); err != nil {
		return fmt.Errorf("--podbugger-allowed-images: %w", err)
	}
	if _, err := notify.LoadSinks(o.PodBuggerIncidentSinksFile); err != nil {
		return fmt.Errorf("--podbugger-incident-sinks-file: %w", err)
	}
	return nil
}
