package manager_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// No reconcile of the manager's controllers blocks for good: its context
// ends after ReconcileTimeout, whatever it waits on (a cache that never
// syncs, an apiserver that does not answer).
func TestEveryReconcileIsBounded(t *testing.T) {
	g := testenv.NewG(t)
	opts := env.ManagerOptions()
	opts.ReconcileTimeout = 500 * time.Millisecond
	mgr, _ := env.StartManager(t, opts)

	ns := env.Namespace(t)
	var ended atomic.Value
	err := ctrl.NewControllerManagedBy(mgr).Named("blocked").
		For(&corev1.ConfigMap{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == ns
		}))).
		Complete(reconcile.Func(func(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
			<-ctx.Done() // a wait that only ctx ends
			ended.CompareAndSwap(nil, ctx.Err())
			return reconcile.Result{}, nil
		}))
	g.Expect(err).NotTo(HaveOccurred())
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wake"}})
	g.Eventually(func() error { e, _ := ended.Load().(error); return e }).WithTimeout(10*time.Second).
		Should(Satisfy(func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }),
			"a reconcile waiting on its context was not ended by the reconcile timeout")
}
