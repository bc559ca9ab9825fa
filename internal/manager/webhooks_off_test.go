package manager_test

import (
	"flag"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/deckhand-dev/deckhand/internal/manager"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

func TestEnableWebhooksFlagAndEnvironment(t *testing.T) {
	tests := map[string]struct {
		env  string
		args []string
		want bool // webhooks on
	}{
		"on by default":                         {want: true},
		"--enable-webhooks=false":               {args: []string{"--enable-webhooks=false"}},
		"ENABLE_WEBHOOKS=false, as kubebuilder": {env: "false"},
		"the flag wins over the environment":    {env: "false", args: []string{"--enable-webhooks=true"}, want: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Setenv("ENABLE_WEBHOOKS", tt.env)
			var o manager.Options
			fs := flag.NewFlagSet("deckhand", flag.ContinueOnError)
			o.BindFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if got := o.WebhooksEnabled(); got != tt.want {
				t.Errorf("webhooks enabled = %v, want %v", got, tt.want)
			}
		})
	}
}

// With webhooks off the manager becomes ready without a webhook server:
// nothing listens on the webhook port.
func TestManagerRunsWithoutWebhooks(t *testing.T) {
	g := NewWithT(t)
	opts := env.ManagerOptions()
	opts.HealthProbeBindAddress = testenv.FreeAddr(t)
	_, port, err := net.SplitHostPort(testenv.FreeAddr(t))
	g.Expect(err).NotTo(HaveOccurred())
	opts.WebhookPort, _ = strconv.Atoi(port)
	opts.DisableWebhooks = true
	env.StartManager(t, opts)

	g.Eventually(func() (int, error) {
		resp, err := http.Get("http://" + opts.HealthProbeBindAddress + "/readyz")
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		return resp.StatusCode, nil
	}).WithTimeout(testenv.Timeout).Should(Equal(http.StatusOK))
	g.Consistently(func() error {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", port), time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err
	}).WithTimeout(time.Second).Should(HaveOccurred(), "a webhook server listens")
}
