package manager

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/deckhand-dev/deckhand/internal/eventnote"
	"github.com/deckhand-dev/deckhand/internal/metricsauth"
	"github.com/deckhand-dev/deckhand/internal/scopedcache"
	"github.com/deckhand-dev/deckhand/internal/scopedcache/pagedlist"
	"github.com/deckhand-dev/deckhand/internal/webhookauth"
	"github.com/deckhand-dev/deckhand/internal/webhookcert"
)

// Scheme knows every type Deckhand reads or writes: the built-in kinds and
// Deckhand's own API groups.
var Scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(Scheme))
	for _, c := range controllers {
		utilruntime.Must(c.AddToScheme(Scheme))
	}
}

// New builds a manager from opts against the cluster cfg points at, with
// every enabled controller registered. It does not start it, and makes no
// request of its own but the discovery its cache needs: with self-signed
// webhook certificates, the certificate is issued (or, at a restart, checked)
// as the manager starts, beside its caches (issuingServer). (The context,
// which bounded that issue when New did it, bounds nothing now; the logger
// it carries, ctrl.Log without one, is where the standard logger goes:
// routeStandardLog.)
func New(ctx context.Context, cfg *rest.Config, opts Options) (ctrl.Manager, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	routeStandardLog(ctrl.LoggerFrom(ctx).WithName("http"))
	if opts.LeaderElectionNamespace == "" {
		opts.LeaderElectionNamespace = opts.Namespace
	}
	if opts.WebhookCertDir == "" {
		opts.WebhookCertDir = filepath.Join(os.TempDir(), "deckhand-webhook-certs")
	}
	if opts.MetricsCertDir == "" && opts.WebhooksEnabled() {
		// The metrics are served with the webhook certificate, which names
		// the metrics Service too: a scraper verifies it with the CA in the
		// certificate Secret (ca.crt) instead of skipping verification.
		opts.MetricsCertDir = opts.WebhookCertDir
	}
	// HTTP/2 is off on both servers: its stream-reset and rapid-reset flaws
	// (CVE-2023-44487, CVE-2023-39325) are not worth the gain here.
	noHTTP2 := func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }
	clientCAs, err := webhookClientCAs(opts)
	if err != nil {
		return nil, err
	}
	webhookServer, metricsTLS, rotator := servers(opts, clientCAs, noHTTP2)

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: Scheme,
		Cache:  cacheOptions(opts),
		// Pods and Jobs are cached only in the namespaces a controller can
		// act in (internal/scopedcache).
		// A controller starts once the kinds it reads have synced
		// (cachesync.go).
		NewCache: perKindSync(scopedcache.Options{KeepFor: opts.ScopedCacheKeepFor}.New(needs(opts)...), needs(opts)),
		Metrics: metricsserver.Options{
			BindAddress:    opts.MetricsBindAddress,
			SecureServing:  true,
			FilterProvider: metricsauth.FilterFor(opts.MetricsTokenAudiences),
			CertDir:        opts.MetricsCertDir,
			TLSOpts:        metricsTLS,
		},
		WebhookServer:                 webhookServer,
		HealthProbeBindAddress:        opts.HealthProbeBindAddress,
		PprofBindAddress:              opts.PprofBindAddress,
		LeaderElection:                opts.LeaderElect,
		LeaderElectionID:              opts.LeaderElectionID,
		LeaderElectionNamespace:       opts.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &opts.LeaseDuration,
		RenewDeadline:                 &opts.RenewDeadline,
		RetryPeriod:                   &opts.RetryPeriod,
		GracefulShutdownTimeout:       &opts.GracefulShutdownTimeout,
		Controller: config.Controller{
			SkipNameValidation:    &opts.SkipControllerNameValidation,
			ReconciliationTimeout: cmp.Or(opts.ReconcileTimeout, DefaultReconcileTimeout),
			CacheSyncTimeout:      sourceSyncTimeout,
			// Warm standby: a replica that does not lead starts its
			// controllers' watches anyway, so its informers are listed and
			// synced (and its queues hold every object) when it wins the
			// Lease; a failover then waits for the Lease, not for a list of
			// every pod. Its workers still start only with leadership, so a
			// follower writes nothing (TestFollowerIsWarmAndWritesNothing).
			// The price is a follower's memory: the same cache as the leader's.
			EnableWarmup: ptr.To(true),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}

	if err := setupControllers(mgr, opts); err != nil {
		return nil, err
	}
	if opts.DisableWebhooks {
		ctrl.Log.WithName("setup").Info("webhooks are off: JobWatcher patterns and the PodBugger policy are not checked at admission; " +
			"installed webhook configurations that point at this manager will refuse those kinds; " +
			"PodSets and PodBuggers cannot be read or written as v1alpha1 (no conversion webhook)")
	}
	if opts.WebhooksEnabled() {
		webhookcert.ReportExpiry(opts.WebhookCertDir)
	}
	if rotator != nil {
		// Through the manager's HTTP client (its connection to the
		// apiserver) and RESTMapper (which NewManager's cache filled): the
		// rotator makes no discovery request and no handshake of its own.
		if rotator.Client, err = client.New(cfg, client.Options{
			Scheme: mgr.GetScheme(), HTTPClient: mgr.GetHTTPClient(), Mapper: mgr.GetRESTMapper(),
		}); err != nil {
			return nil, fmt.Errorf("creating the webhook certificate's client: %w", err)
		}
	}

	// A runnable that needs leadership only starts once this replica leads,
	// which makes the log line below the sign of which replica is active.
	if err := mgr.Add(manager.RunnableFunc(func(context.Context) error {
		if opts.LeaderElect {
			ctrl.Log.WithName("setup").Info("elected leader", "lease", opts.LeaderElectionID)
		}
		return nil
	})); err != nil {
		return nil, fmt.Errorf("adding leadership announcer: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("informers", cacheSynced(mgr)); err != nil {
		return nil, fmt.Errorf("adding ready check: %w", err)
	}
	if opts.WebhooksEnabled() {
		if err := mgr.AddReadyzCheck("webhooks", mgr.GetWebhookServer().StartedChecker()); err != nil {
			return nil, fmt.Errorf("adding webhook ready check: %w", err)
		}
	}
	return mgr, nil
}

// webhookClientCAs are the CAs of --webhook-client-ca-file, nil without it
// or without webhooks.
func webhookClientCAs(opts Options) (*webhookauth.ClientCAs, error) {
	if opts.WebhookClientCAFile == "" || !opts.WebhooksEnabled() {
		return nil, nil
	}
	cas, err := webhookauth.Load(opts.WebhookClientCAFile)
	if err != nil {
		return nil, fmt.Errorf("--webhook-client-ca-file: %w", err)
	}
	return cas, nil
}

// servers are the webhook server and the metrics server's TLS options:
// certificates read from their directories (cert-manager's, envtest's), or,
// with self-signed certificates, the ones the rotator (returned) issued,
// none before its first pass has injected the CA (issuingServer). With
// clientCAs, the webhook server admits only reviews whose sender presented
// a certificate they verify (conversion excepted: webhookauth).
func servers(opts Options, clientCAs *webhookauth.ClientCAs, tlsOpts ...func(*tls.Config)) (webhook.Server, []func(*tls.Config), *webhookcert.Rotator) {
	webhookTLS, metricsTLS := slices.Clone(tlsOpts), slices.Clone(tlsOpts)
	if clientCAs != nil {
		webhookTLS = append(webhookTLS, clientCAs.TLSOption)
	}
	var rotator *webhookcert.Rotator
	if opts.WebhooksEnabled() && opts.WebhookCertMode == CertModeSelfSigned {
		rotator = newRotator(opts)
		issued := func(c *tls.Config) { c.GetCertificate = rotator.GetCertificate }
		webhookTLS = append(webhookTLS, issued)
		if opts.MetricsCertDir == opts.WebhookCertDir {
			metricsTLS = append(metricsTLS, issued)
		}
	}
	server := newGuardedServer(webhook.NewServer(webhook.Options{
		Host:    opts.WebhookHost,
		Port:    opts.WebhookPort,
		CertDir: opts.WebhookCertDir,
		TLSOpts: webhookTLS,
	}), clientCAs != nil)
	if rotator == nil {
		return server, metricsTLS, nil
	}
	return issuingServer{Server: server, rotator: rotator}, metricsTLS, rotator
}

// newRotator is the rotator of the self-signed webhook certificate; its
// Client is set once the manager exists.
func newRotator(opts Options) *webhookcert.Rotator {
	return &webhookcert.Rotator{
		SecretNamespace:          opts.Namespace,
		SecretName:               opts.WebhookCertSecret,
		Hosts:                    certHosts(opts),
		CertDir:                  opts.WebhookCertDir,
		ValidatingConfigurations: []string{ValidatingWebhookConfiguration},
		CRDs:                     ConvertedCRDs(),
	}
}

// issuingServer is the webhook server with the rotator that issues its
// certificate and injects its CA: both start with the manager's webhooks,
// before its caches, so the caches list while the rotator's first pass runs
// (at a restart, mostly reading the converted CRDs back: the PodSet CRD is
// over a megabyte) instead of after it. Neither the webhook server nor the
// metrics server completes a TLS handshake before that pass has found the
// CA in every caBundle (Rotator.GetCertificate): until then the apiserver's
// webhook and conversion calls fail as they did when nothing listened yet,
// and /readyz, which dials the webhook server, is not ready. A first pass
// that fails stops the manager with its error, as New did when it ran it.
type issuingServer struct {
	webhook.Server
	rotator *webhookcert.Rotator
}

func (s issuingServer) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 2)
	go func() { errs <- s.rotator.Start(ctx) }()
	go func() { errs <- s.Server.Start(ctx) }()
	first := <-errs
	cancel()
	return errors.Join(first, <-errs)
}

// certHosts are the names the self-signed certificate is for: the webhook
// Service's and the metrics Service's, unless --webhook-cert-hosts says.
func certHosts(opts Options) []string {
	if len(opts.WebhookCertHosts) > 0 {
		return opts.WebhookCertHosts
	}
	return []string{
		fmt.Sprintf("%s.%s.svc", WebhookServiceName, opts.Namespace),
		fmt.Sprintf("%s.%s.svc", MetricsServiceName, opts.Namespace),
	}
}

// cacheOptions is how the manager's cache holds objects: without
// managedFields, in the watched namespaces, and as the enabled controllers
// ask for the kinds they own.
func cacheOptions(opts Options) cache.Options {
	cacheOpts := cache.Options{
		// Most readers never look at managedFields; dropping them roughly
		// halves the memory of the cache. A controller that needs them says
		// so in its CacheByObject.
		DefaultTransform: cache.TransformStripManagedFields(),
	}
	if len(opts.WatchNamespaces) > 0 {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range opts.WatchNamespaces {
			cacheOpts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	// Pods are read by more than one controller, so how they are cached is
	// decided here, for all of them (cache.go).
	cacheOpts.ByObject = podCache()
	for _, c := range controllers {
		if c.CacheByObject == nil || !opts.enabled(c.Name) {
			continue
		}
		maps.Copy(cacheOpts.ByObject, c.CacheByObject())
	}
	// Informers list in pages rather than stream their lists: a streamed
	// list waits up to 1.25 s for the apiserver's bookmark, and the scoped
	// cache's kinds wait for two in a row (scopedcache/pagedlist). The
	// scoped cache's own informers are built with this constructor too.
	cacheOpts.NewInformer = pagedlist.Informers(cacheOpts)
	return cacheOpts
}

// needs are the enabled controllers' needs for the kinds cached per
// namespace; a disabled controller's keep its kinds scoped, needing none.
func needs(opts Options) []scopedcache.Need {
	var out []scopedcache.Need
	for _, c := range controllers {
		if c.Needs == nil {
			continue
		}
		for _, n := range c.Needs() {
			if !opts.enabled(c.Name) {
				n.Namespaces = nil
			}
			if _, ok := n.Object.(*corev1.Pod); ok {
				n.Expand = ExpandPod // SlimPod holds pods as cachedPods (cache.go)
			}
			out = append(out, n)
		}
	}
	return out
}

// cacheSynced is ready once every informer the controllers need has synced,
// so that a replica behind a Service only takes webhook traffic when it has
// a complete view.
func cacheSynced(mgr ctrl.Manager) healthz.Checker {
	synced := mgr.GetCache().WaitForCacheSync
	if c, ok := mgr.GetCache().(*eachKindSynced); ok {
		synced = c.allSynced
	}
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !synced(ctx) {
			return fmt.Errorf("informer caches have not synced")
		}
		return nil
	}
}

// boundedNotes gives every controller an Event recorder whose notes fit
// what the apiserver takes (eventnote.Recorder): a note built from an error or
// a list is cut, not lost.
type boundedNotes struct{ ctrl.Manager }

func (m boundedNotes) GetEventRecorder(name string) recorder.EventRecorder {
	return eventnote.Recorder(m.Manager.GetEventRecorder(name))
}

// setupControllers registers every enabled controller of the registry and,
// unless webhooks are off, its webhooks; the conversion webhooks of every
// kind, enabled or not.
func setupControllers(mgr ctrl.Manager, opts Options) error {
	opts.ManagerNamespace = opts.Namespace
	for _, c := range controllers {
		if c.SetupConversion != nil && opts.WebhooksEnabled() {
			if err := c.SetupConversion(mgr); err != nil {
				return fmt.Errorf("setting up the conversion webhook of %s: %w", c.Name, err)
			}
		}
		if !opts.enabled(c.Name) {
			continue
		}
		if err := c.Setup(boundedNotes{mgr}, opts.Options); err != nil {
			return fmt.Errorf("setting up controller %s: %w", c.Name, err)
		}
		if c.SetupWebhooks != nil && opts.WebhooksEnabled() {
			if err := c.SetupWebhooks(mgr, opts.Options); err != nil {
				return fmt.Errorf("setting up the webhooks of %s: %w", c.Name, err)
			}
		}
		ctrl.Log.WithName("setup").Info("controller enabled", "controller", c.Name)
	}
	return nil
}
