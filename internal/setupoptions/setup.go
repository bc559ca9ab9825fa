// Package setupoptions holds what every kind's Setup function receives: the part
// of the manager's options that controllers and webhooks act on. It sits
// below both the manager (which fills it from flags) and the controller and
// webhook packages (which read it), so neither imports the other.
package setupoptions

import "strings"

// Options are the settings controllers and webhooks are set up with.
type Options struct {
	// PodBuggerAllowedImages are the image patterns a PodBugger may use
	// (globs, or regular expressions after "re:"); none when empty.
	PodBuggerAllowedImages []string
	// PodBuggerAllowGeneralProfile lets PodBuggers use the general profile.
	PodBuggerAllowGeneralProfile bool
	// PodBuggerAllowHostAccess lets PodBuggers inject into pods that reach
	// into their node (host namespaces, privileged containers, host paths).
	PodBuggerAllowHostAccess bool
	// PodBuggerIncidentWritesPerMinute is how many PodIncidents each
	// PodBugger writes in a minute; 0 means the default.
	PodBuggerIncidentWritesPerMinute int
	// PodBuggerIncidentSinksFile is the file of the sinks PodBuggers may
	// name for notifications of their incidents; none when empty.
	PodBuggerIncidentSinksFile string
	// PodBuggerRedactSecretEnv makes the incident recorder read the Secrets
	// a failing pod's environment takes values from, and remove those values
	// from its record, where the manager may get Secrets.
	PodBuggerRedactSecretEnv bool
	// JobWatcherProtectedNamespaces are the namespaces ClusterJobWatchers do
	// not reach unless a pattern names them exactly (beside the manager's
	// own and those labelled deckhand.dev/protected=true); nil means the
	// defaults (jobwatcher.DefaultProtectedNamespaces).
	JobWatcherProtectedNamespaces []string
	// ManagerNamespace is the manager's own namespace (its --namespace),
	// which ClusterJobWatchers do not reach unless a pattern names it
	// exactly; empty when it has none (out of cluster).
	ManagerNamespace string
}

// SplitList splits a flag's comma-separated value into its items, trimmed,
// empty ones dropped.
func SplitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
