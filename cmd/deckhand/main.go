// Command deckhand runs Deckhand's controllers and admission webhooks.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/deckhand-dev/deckhand/internal/manager"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "deckhand: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	var opts manager.Options
	opts.BindFlags(flag.CommandLine)
	zapOpts := zap.Options{Development: false}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()

	logger := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger) // client-go's leader election and informers log through klog
	log := ctrl.Log.WithName("setup")

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("finding the cluster (set KUBECONFIG or run in a pod): %w", err)
	}
	ctx := ctrl.SetupSignalHandler()
	mgr, err := manager.New(ctx, cfg, opts)
	if err != nil {
		return err
	}

	log.Info("starting manager", "leaderElection", opts.LeaderElect)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running manager: %w", err)
	}
	log.Info("manager stopped")
	return nil
}
