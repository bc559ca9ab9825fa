package testenv

import (
	"context"
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WithoutValidation removes the named validating webhooks (as
// "vjobwatcher-v1.batch.deckhand.dev") from the envtest apiserver until the
// test ends, as a cluster whose manager runs with --enable-webhooks=false
// has them: what they would refuse is stored, and the controller meets it.
// The apiserver takes a moment to notice; create with Eventually.
func (e *Env) WithoutValidation(t testing.TB, names ...string) {
	t.Helper()
	ctx := context.Background()
	var removed []admissionregistrationv1.ValidatingWebhook
	var key client.ObjectKey
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var list admissionregistrationv1.ValidatingWebhookConfigurationList
		if err := e.Client.List(ctx, &list); err != nil {
			return err
		}
		for i := range list.Items {
			cfg := &list.Items[i]
			keep := slices.DeleteFunc(slices.Clone(cfg.Webhooks), func(w admissionregistrationv1.ValidatingWebhook) bool {
				return slices.Contains(names, w.Name)
			})
			if len(keep) == len(cfg.Webhooks) {
				continue
			}
			removed = removed[:0]
			for _, w := range cfg.Webhooks {
				if slices.Contains(names, w.Name) {
					removed = append(removed, w)
				}
			}
			key = client.ObjectKeyFromObject(cfg)
			cfg.Webhooks = keep
			return e.Client.Update(ctx, cfg)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("removing validating webhooks %v: %v", names, err)
	}
	if len(removed) != len(names) {
		t.Fatalf("validating webhooks %v: found %d", names, len(removed))
	}
	t.Cleanup(func() {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var cfg admissionregistrationv1.ValidatingWebhookConfiguration
			if err := e.Client.Get(ctx, key, &cfg); err != nil {
				return err
			}
			cfg.Webhooks = append(cfg.Webhooks, removed...)
			return e.Client.Update(ctx, &cfg)
		})
		if err != nil {
			t.Errorf("restoring validating webhooks %v: %v", names, err)
		}
	})
}
