package webhookcert

import (
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// expiryDesc describes the gauge the DeckhandWebhookCertificateExpiring
// alert watches.
var expiryDesc = prometheus.NewDesc("deckhand_webhook_certificate_expiry_timestamp_seconds",
	"When the webhook serving certificate this replica serves expires (Unix time), read from tls.crt in the webhook certificate directory at each scrape; absent while there is none.",
	nil, nil)

// expiry reports the certificate in a directory, whoever wrote it: this
// package's Rotator (self-signed mode) or cert-manager (external mode).
type expiry struct{ dir atomic.Pointer[string] }

var servingExpiry = &expiry{}

func init() { metrics.Registry.MustRegister(servingExpiry) }

// ReportExpiry makes deckhand_webhook_certificate_expiry_timestamp_seconds
// report the serving certificate in dir/tls.crt.
func ReportExpiry(dir string) { servingExpiry.dir.Store(&dir) }

func (e *expiry) Describe(ch chan<- *prometheus.Desc) { ch <- expiryDesc }

// Collect reads the certificate now, so that the value is the one the
// webhook server's certificate watcher has (or is about to have) loaded,
// also after a renewal by another replica or by cert-manager.
func (e *expiry) Collect(ch chan<- prometheus.Metric) {
	dir := e.dir.Load()
	if dir == nil {
		return
	}
	data, err := os.ReadFile(filepath.Join(*dir, CertKey))
	if err != nil {
		return
	}
	cert, err := parseCert(data)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(expiryDesc, prometheus.GaugeValue, float64(cert.NotAfter.Unix()))
}
