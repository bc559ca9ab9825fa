package jobwatcher

import (
	"context"
	"flag"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	"github.com/deckhand-dev/deckhand/internal/setupoptions"
)

// DefaultProtectedNamespaces are the namespaces ClusterJobWatchers leave
// alone unless a pattern names them exactly, when the operator names none
// (--jobwatcher-protected-namespaces): the cluster's own and those of
// common platform components, whose Jobs (certificate issuers, backups,
// upgrade hooks) a pattern like ".*" written for tenants must not delete.
var DefaultProtectedNamespaces = []string{
	metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease,
	"cert-manager", "monitoring", "prometheus", "observability", "logging",
	"ingress-nginx", "argocd", "flux-system", "istio-system", "gatekeeper-system",
	"kyverno", "velero", "metallb-system", "calico-system", "tigera-operator",
	"local-path-storage", "external-secrets", "vault",
}

// BindFlags registers the JobWatcher flags on fs, into o: the registry
// entry's BindFlags.
func BindFlags(fs *flag.FlagSet, o *setupoptions.Options) {
	fs.Func("jobwatcher-protected-namespaces",
		"Comma-separated namespaces ClusterJobWatchers do not reach unless one of their namespacePatterns names them exactly "+
			"(beside the manager's own, and namespaces labelled "+deckhandbatchv1.ProtectedNamespaceLabel+"=true); replaces the default: "+
			strings.Join(DefaultProtectedNamespaces, ","),
		func(v string) error {
			o.JobWatcherProtectedNamespaces = append(make([]string, 0), setupoptions.SplitList(v)...)
			return nil
		})
}

// ProtectedNamespaces is the list of namespaces opts protects: the
// operator's (--jobwatcher-protected-namespaces) or the defaults, and the
// manager's own.
func ProtectedNamespaces(opts setupoptions.Options) []string {
	names := opts.JobWatcherProtectedNamespaces
	if names == nil {
		names = DefaultProtectedNamespaces
	}
	if opts.ManagerNamespace == "" {
		return slices.Clone(names)
	}
	return append(slices.Clone(names), opts.ManagerNamespace)
}

// protection says which namespaces ClusterJobWatchers leave alone unless
// one of their namespacePatterns names them exactly: those listed (the
// operator's list, or DefaultProtectedNamespaces, and the manager's own),
// and those labelled deckhand.dev/protected=true, read from namespaces (the
// cache) when it is set. It never changes once made.
type protection struct {
	names      map[string]bool
	namespaces client.Reader
}

// newProtection protects names (DefaultProtectedNamespaces when nil; the
// manager's own is among them: ProtectedNamespaces), and the namespaces
// labelled so in namespaces (none when nil).
func newProtection(names []string, namespaces client.Reader) *protection {
	if names == nil {
		names = DefaultProtectedNamespaces
	}
	p := &protection{names: make(map[string]bool, len(names)), namespaces: namespaces}
	for _, n := range names {
		p.names[n] = true
	}
	return p
}

// protects reports whether ns is protected. A namespace whose labels
// cannot be read is protected: a deletion waits rather than guess.
func (p *protection) protects(ns string) bool {
	if p == nil {
		return false
	}
	if p.names[ns] {
		return true
	}
	if p.namespaces == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n := &corev1.Namespace{}
	if err := p.namespaces.Get(ctx, client.ObjectKey{Name: ns}, n, client.UnsafeDisableDeepCopy); err != nil {
		return !apierrors.IsNotFound(err)
	}
	return n.Labels[deckhandbatchv1.ProtectedNamespaceLabel] == "true"
}
