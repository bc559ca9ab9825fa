// Package manager turns Deckhand's command-line options into a running
// controller-runtime manager with every enabled controller and webhook.
package manager

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/tools/leaderelection"

	"github.com/deckhand-dev/deckhand/internal/setupoptions"
)

// Options are the manager's settings, bound to command-line flags by BindFlags.
type Options struct {
	// MetricsBindAddress is where /metrics is served over HTTPS behind
	// Kubernetes authentication and authorization; "0" turns it off.
	MetricsBindAddress string
	// MetricsCertDir holds tls.crt/tls.key for the metrics server; when empty a
	// self-signed certificate is generated at start.
	MetricsCertDir string
	// MetricsTokenAudiences, when set, are the audiences a scraper's token
	// must be issued for.
	MetricsTokenAudiences []string
	// HealthProbeBindAddress serves /healthz and /readyz over plain HTTP.
	HealthProbeBindAddress string
	// PprofBindAddress serves Go's /debug/pprof/ endpoints over plain HTTP,
	// unauthenticated; empty or "0" (the default) turns them off.
	PprofBindAddress string

	// LeaderElect makes only one replica reconcile at a time, coordinated
	// through a Lease named LeaderElectionID.
	LeaderElect bool
	// LeaderElectionNamespace is where the Lease lives; empty means the
	// namespace the manager runs in (or "default" out of cluster).
	LeaderElectionNamespace string
	// LeaderElectionID names the Lease.
	LeaderElectionID string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration

	// WatchNamespaces limits the namespaced kinds to these namespaces; empty
	// means all namespaces.
	WatchNamespaces []string
	// Controllers names the controllers to run; "*" means all of them.
	Controllers []string

	// Namespace is the manager's own namespace: it holds the leader-election
	// Lease (unless LeaderElectionNamespace says otherwise) and the webhook
	// certificate Secret.
	Namespace string

	// DisableWebhooks runs the controllers without their admission webhooks
	// (--enable-webhooks=false, or ENABLE_WEBHOOKS=false as kubebuilder
	// projects spell it): what only a webhook checks then goes unchecked at
	// admission.
	DisableWebhooks bool
	// WebhookHost, WebhookPort and WebhookCertDir configure the admission
	// webhook server; an empty host listens on every interface.
	WebhookHost    string
	WebhookPort    int
	WebhookCertDir string
	// WebhookCertMode is CertModeSelfSigned (the manager issues, rotates and
	// injects its own certificate) or CertModeExternal (cert-manager or
	// another tool puts tls.crt and tls.key in WebhookCertDir).
	WebhookCertMode string
	// WebhookCertSecret names the Secret in Namespace that holds the
	// self-signed CA and certificate.
	WebhookCertSecret string
	// WebhookCertHosts are the names the self-signed certificate is valid
	// for; empty means the webhook Service's DNS name.
	WebhookCertHosts []string
	// WebhookClientCAFile, when set, is a PEM bundle of the CAs whose
	// client certificates the webhook server accepts: admission reviews
	// sent without one are refused (internal/webhookauth). Conversion stays
	// open: the apiserver calls it without a client certificate.
	WebhookClientCAFile string

	// GracefulShutdownTimeout bounds how long running reconciles may take to
	// finish when the manager is stopped.
	GracefulShutdownTimeout time.Duration

	// ReconcileTimeout bounds every reconcile of every controller: its
	// context is cancelled then, and the request retried with backoff, so
	// nothing (a cache wait, a call to an apiserver that does not answer)
	// holds a worker for good. Zero is DefaultReconcileTimeout. It has no
	// flag.
	ReconcileTimeout time.Duration

	// ScopedCacheKeepFor is how long the scoped cache keeps a namespace's
	// pod or Job informer after nothing needs or reads it, and how long a
	// read waits for one nothing needs that cannot sync: zero is
	// scopedcache.DefaultKeepFor (1 minute). It has no flag: test/faults
	// shortens it to drive an apiserver outage past it in seconds.
	ScopedCacheKeepFor time.Duration

	// SkipControllerNameValidation lets several managers in one process
	// register the same controllers, as tests that start a manager each do.
	// It has no flag: a real manager must keep controller names unique.
	SkipControllerNameValidation bool

	// Options are what controllers and webhooks are set up with (the
	// PodBugger policy flags).
	setupoptions.Options
}

// DefaultReconcileTimeout is how long a reconcile may run: far beyond what
// the largest one takes (a PodSet creating hundreds of pods in batches),
// short enough that a wedged worker comes back within minutes.
const DefaultReconcileTimeout = 2 * time.Minute

// DefaultLeaderElectionID is the name of the Lease the replicas compete for.
const DefaultLeaderElectionID = "deckhand.deckhand.dev"

// Webhook certificate modes.
const (
	CertModeSelfSigned = "self-signed"
	CertModeExternal   = "external"
)

// The names the installs give the webhook Service and configuration; the
// self-signed mode's RBAC is limited to this configuration (Deckhand has no
// mutating webhook).
const (
	WebhookServiceName             = "deckhand-webhook-service"
	MetricsServiceName             = "deckhand-controller-manager-metrics"
	ValidatingWebhookConfiguration = "deckhand-validating-webhook-configuration"
)

// BindFlags registers the options on fs with their defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", ":8443",
		"Address the HTTPS metrics endpoint binds to (authenticated and authorized through the Kubernetes API); \"0\" disables it.")
	fs.StringVar(&o.MetricsCertDir, "metrics-cert-dir", "",
		"Directory with tls.crt and tls.key for the metrics server; empty serves the webhook certificate (its CA is ca.crt of the certificate Secret), or, with webhooks off, a self-signed one.")
	fs.Func("metrics-token-audiences",
		"Audiences a scraper's token must be issued for (comma-separated), as a projected ServiceAccount token with that audience; empty accepts any token the apiserver accepts, its own audience included.",
		func(s string) error {
			for a := range strings.SplitSeq(s, ",") {
				if a = strings.TrimSpace(a); a != "" {
					o.MetricsTokenAudiences = append(o.MetricsTokenAudiences, a)
				}
			}
			return nil
		})
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", ":8081",
		"Address the /healthz and /readyz probes bind to; \"0\" disables them.")
	fs.StringVar(&o.PprofBindAddress, "pprof-bind-address", "",
		"Address Go's profiling endpoints (/debug/pprof/) bind to, unauthenticated, for diagnosis; empty or \"0\" disables them. Bind to localhost and reach it with kubectl port-forward.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", false,
		"Elect a leader through a Lease so that only one replica reconciles at a time.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "",
		"Namespace of the leader-election Lease; empty is the manager's own namespace.")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", DefaultLeaderElectionID,
		"Name of the leader-election Lease.")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", 15*time.Second,
		"How long a non-leader waits before it may take over an unrenewed Lease.")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second,
		"How long the leader keeps retrying to renew before it gives up leadership.")
	// 500 ms, not client-go's usual 2 s: a replica taking over from a
	// killed leader sees the Lease's last renewal up to a retry interval
	// late and tries again a retry interval after it expires, and each
	// interval is the period plus up to 1.2 times it in jitter, so the
	// takeover is the Lease plus up to 4.4 periods, less the time from the
	// last renewal to the kill (make bench, scale-podset: 15.5 to 18.4 s
	// after the kill at 2 s, 15.2 to 17.7 s at 1 s; at 500 ms at most
	// 17.2 s). The price is two Lease updates a second by the leader and
	// two reads a second by each follower.
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", 500*time.Millisecond,
		"How often candidates try to acquire or renew the Lease.")
	fs.Func("watch-namespace",
		"Comma-separated namespaces the namespaced kinds are watched in; empty watches all namespaces.",
		func(v string) error { o.WatchNamespaces = setupoptions.SplitList(v); return nil })
	fs.Func("controllers",
		fmt.Sprintf("Comma-separated controllers to run, or \"*\" for all. Known: %s.", strings.Join(KnownControllers(), ", ")),
		func(v string) error { o.Controllers = setupoptions.SplitList(v); return nil })
	fs.StringVar(&o.Namespace, "namespace", os.Getenv("POD_NAMESPACE"),
		"The manager's own namespace (holds the Lease and the webhook certificate Secret); defaults to $POD_NAMESPACE.")
	fs.StringVar(&o.WebhookCertMode, "webhook-cert-mode", CertModeSelfSigned,
		"Where the webhook serving certificate comes from: \"self-signed\" (issued, rotated and injected into the webhook configurations by the manager) or \"external\" (tls.crt/tls.key mounted in --webhook-cert-dir, e.g. by cert-manager).")
	fs.StringVar(&o.WebhookCertSecret, "webhook-cert-secret", "deckhand-webhook-server-cert",
		"Secret in --namespace holding the self-signed webhook CA and certificate. The installs ship it empty and the manager fills it; it never creates it (a missing Secret stops the manager, naming it).")
	fs.Func("webhook-cert-hosts",
		"Comma-separated DNS names or IPs for the self-signed webhook certificate; default deckhand-webhook-service.<namespace>.svc.",
		func(v string) error { o.WebhookCertHosts = setupoptions.SplitList(v); return nil })
	fs.StringVar(&o.WebhookClientCAFile, "webhook-client-ca-file", "",
		"PEM file of the CAs whose client certificates the webhook server accepts; set, an admission review sent without such a certificate is refused unread, and one from another CA fails the TLS handshake. "+
			"For an apiserver given a client certificate for the webhook Service (--admission-control-config-file). Conversion (/convert) stays open: the apiserver calls it without one. Empty accepts any client.")
	o.DisableWebhooks = os.Getenv("ENABLE_WEBHOOKS") == "false"
	fs.BoolFunc("enable-webhooks",
		"Serve the admission webhooks (default true, or false when the environment has ENABLE_WEBHOOKS=false). "+
			"Without them JobWatcher patterns and the PodBugger policy are not checked at admission; the controllers still refuse to act on what they forbid.",
		func(v string) error {
			enable, err := strconv.ParseBool(v)
			o.DisableWebhooks = !enable
			return err
		})
	fs.StringVar(&o.WebhookHost, "webhook-host", "", "Address the admission webhook server listens on; empty is every interface.")
	fs.IntVar(&o.WebhookPort, "webhook-port", 9443, "Port the admission webhook server listens on.")
	fs.StringVar(&o.WebhookCertDir, "webhook-cert-dir", "",
		"Directory with tls.crt and tls.key for the webhook server (written there in self-signed mode); empty is $TMPDIR/deckhand-webhook-certs.")
	fs.DurationVar(&o.GracefulShutdownTimeout, "graceful-shutdown-timeout", 30*time.Second,
		"How long running reconciles may take to finish after a stop signal.")
	for _, c := range controllers {
		if c.BindFlags != nil {
			c.BindFlags(fs, &o.Options)
		}
	}
}

// Validate reports every option that cannot work, each naming its flag.
func (o *Options) Validate() error {
	var errs []error
	known := KnownControllers()
	for _, c := range o.Controllers {
		if c != "*" && !slices.Contains(known, c) {
			errs = append(errs, fmt.Errorf("--controllers: unknown controller %q (known: %s)", c, strings.Join(known, ", ")))
		}
	}
	if o.LeaderElect {
		if o.LeaderElectionID == "" {
			errs = append(errs, errors.New("--leader-election-id: must not be empty with --leader-elect"))
		}
		if o.RenewDeadline >= o.LeaseDuration {
			errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline (%s) must be shorter than --leader-elect-lease-duration (%s)", o.RenewDeadline, o.LeaseDuration))
		}
		// client-go's own bound: the renewal's last try, jitter included,
		// must fit in the deadline.
		if o.RenewDeadline <= time.Duration(leaderelection.JitterFactor*float64(o.RetryPeriod)) {
			errs = append(errs, fmt.Errorf("--leader-elect-retry-period (%s) must be shorter than --leader-elect-renew-deadline (%s) divided by %.1f",
				o.RetryPeriod, o.RenewDeadline, leaderelection.JitterFactor))
		}
	}
	switch o.WebhookCertMode {
	case CertModeSelfSigned:
		if o.Namespace == "" && o.WebhooksEnabled() {
			errs = append(errs, errors.New("--namespace: required with --webhook-cert-mode=self-signed (it holds the certificate Secret); set it or $POD_NAMESPACE"))
		}
	case CertModeExternal:
	default:
		errs = append(errs, fmt.Errorf("--webhook-cert-mode: %q is neither %q nor %q", o.WebhookCertMode, CertModeSelfSigned, CertModeExternal))
	}
	for _, c := range controllers {
		if c.ValidateFlags != nil {
			errs = append(errs, c.ValidateFlags(o.Options))
		}
	}
	if o.WebhookPort < 1 || o.WebhookPort > 65535 {
		errs = append(errs, fmt.Errorf("--webhook-port: %d is not a port", o.WebhookPort))
	}
	return errors.Join(errs...)
}

// enabled reports whether the named controller should run.
func (o *Options) enabled(name string) bool {
	return len(o.Controllers) == 0 || slices.Contains(o.Controllers, "*") || slices.Contains(o.Controllers, name)
}

// WebhooksEnabled reports whether the manager serves webhooks: the
// admission webhooks of an enabled controller, or the conversion webhook of
// any kind (served whatever --controllers says).
func (o *Options) WebhooksEnabled() bool {
	if o.DisableWebhooks {
		return false
	}
	for _, c := range controllers {
		if c.SetupConversion != nil || (c.SetupWebhooks != nil && o.enabled(c.Name)) {
			return true
		}
	}
	return false
}
