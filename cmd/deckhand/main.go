// Command deckhand runs Deckhand's controllers and admission webhooks.
package main

import (
	"flag"
	"fmt"
	"os"

	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/deckhand-dev/deckhand/internal/manager"
	"github.com/deckhand-dev/deckhand/internal/version"
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
	showVersion := flag.Bool("version", false, "Print the release of this build and exit.")
	flag.Parse()
	if *showVersion {
		fmt.Println("deckhand", version.Version)
		return nil
	}
	if colourLevels(flag.Lookup("zap-encoder").Value.String(), isTerminal(os.Stderr), os.Getenv("NO_COLOR")) {
		zapOpts.EncoderConfigOptions = append(zapOpts.EncoderConfigOptions, func(c *zapcore.EncoderConfig) {
			c.EncodeLevel = zapcore.CapitalColorLevelEncoder
		})
	}

	logger := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger) // client-go's leader election and informers log through klog
	log := ctrl.Log.WithName("setup")
	if limit, err := setMemoryLimit(cgroupMemoryFiles); err != nil {
		log.Error(err, "reading the container's memory limit; GOMEMLIMIT left unset")
	} else if limit > 0 {
		log.Info("Go memory limit set from the container's", "GOMEMLIMIT", limit)
	}

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

// colourLevels reports whether log levels are coloured: only in console
// logs written to a terminal (`make run`), never in JSON, and never when the
// NO_COLOR convention asks not to.
func colourLevels(encoder string, terminal bool, noColor string) bool {
	return encoder == "console" && terminal && noColor == ""
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
