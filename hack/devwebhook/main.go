// Command devwebhook installs Deckhand's webhook configurations pointed at a
// manager running outside the cluster. `make run` uses it; see
// internal/localwebhooks.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/localwebhooks"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "devwebhook: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	manifests := flag.String("manifests", "config/webhook/manifests.yaml", "controller-gen's webhook configurations")
	host := flag.String("host", "127.0.0.1", "address the manager's webhook server listens on")
	port := flag.Int("port", 9443, "port the manager's webhook server listens on")
	crds := flag.Bool("crds", false, "read CRDs from stdin and print them with their conversion webhook pointed at the manager (install nothing)")
	flag.Parse()

	if *crds {
		in, err := io.ReadAll(os.Stdin)
		if err != nil {
			return err
		}
		out, err := localwebhooks.PointCRDs(in, fmt.Sprintf("https://%s/convert", net.JoinHostPort(*host, fmt.Sprint(*port))))
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(out)
		return err
	}

	data, err := os.ReadFile(*manifests)
	if errors.Is(err, os.ErrNotExist) {
		return nil // no webhooks yet
	} else if err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	return localwebhooks.Install(context.Background(), c, data, *host, *port)
}
