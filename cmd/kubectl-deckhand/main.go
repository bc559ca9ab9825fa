// Command kubectl-deckhand is the kubectl plugin of Deckhand: `kubectl
// deckhand` reads Deckhand's objects and explains them. It never writes.
//
//	kubectl deckhand status [-A]            every Deckhand object, Ready and Stalled, with the reason
//	kubectl deckhand why job NAME           which watcher reaches a Job, what applies, when it goes
//	kubectl deckhand incidents [POD]        PodIncidents, newest first
//	kubectl deckhand incidents logs NAME    the log tail a PodIncident captured
//	kubectl deckhand debug POD              what a PodBugger would inject into a pod, and what blocks it
//
// Install it on PATH (`go install ./cmd/kubectl-deckhand`, or the krew
// manifest `make release` writes) and kubectl finds it.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/version"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "kubectl deckhand: %v\n", err)
		if errors.Is(err, errUsage) {
			fmt.Fprint(os.Stderr, usage)
			os.Exit(2)
		}
		os.Exit(1)
	}
}

const usage = `Usage:
  kubectl deckhand status [-A] [-n NAMESPACE]
  kubectl deckhand why job NAME [-n NAMESPACE]
  kubectl deckhand incidents [POD] [-A] [-n NAMESPACE]
  kubectl deckhand incidents logs NAME [-n NAMESPACE]
  kubectl deckhand debug POD [-n NAMESPACE] [--allowed-images GLOBS] [--allow-general-profile] [--allow-host-access]
  kubectl deckhand version
Flags shared by all: --kubeconfig FILE, --context NAME, -n/--namespace NAME.
`

var errUsage = errors.New("wrong arguments")

// cli is what every subcommand works with: a client (and discovery, for
// the kinds the apiserver serves), the namespace to look in, and the clock.
type cli struct {
	c             client.Client
	discovery     discovery.DiscoveryInterface
	namespace     string
	allNamespaces bool
	out           io.Writer
	now           time.Time
}

// command is one subcommand: its own flags, bound to fs, and what it does
// with the arguments left.
type command struct {
	flags func(fs *flag.FlagSet)
	run   func(x *cli, args []string) error
}

func run(args []string, out io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	if args[0] == "version" {
		_, err := fmt.Fprintln(out, "kubectl-deckhand", version.Version)
		return err
	}
	commands := map[string]command{
		"status":    statusCommand(),
		"why":       whyCommand(),
		"incidents": incidentsCommand(),
		"debug":     debugCommand(),
	}
	cmd, ok := commands[args[0]]
	if !ok {
		return fmt.Errorf("%w: no subcommand %q", errUsage, args[0])
	}
	fs := flag.NewFlagSet("kubectl deckhand "+args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	kubeconfig := fs.String("kubeconfig", "", "the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	context := fs.String("context", "", "the kubeconfig context")
	var namespace string
	fs.StringVar(&namespace, "namespace", "", "the namespace (default: the context's)")
	fs.StringVar(&namespace, "n", "", "the namespace (default: the context's)")
	var all bool
	fs.BoolVar(&all, "all-namespaces", false, "every namespace")
	fs.BoolVar(&all, "A", false, "every namespace")
	if cmd.flags != nil {
		cmd.flags(fs)
	}
	rest, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	x, err := connect(*kubeconfig, *context, namespace)
	if err != nil {
		return err
	}
	x.allNamespaces, x.out = all, out
	return cmd.run(x, rest)
}

// parseInterspersed parses flags wherever they stand among the arguments,
// as kubectl does (`incidents web -n team` and `incidents -n team web`).
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return rest, nil
		}
		rest = append(rest, args[0])
		args = args[1:]
	}
}

// connect builds a client for the kubeconfig and context kubectl would use,
// and the namespace: the flag's, or the context's.
func connect(kubeconfig, context, namespace string) (*cli, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("finding the cluster: %w", err)
	}
	cfg.UserAgent = "kubectl-deckhand/" + version.Version
	if namespace == "" {
		if namespace, _, err = loader.Namespace(); err != nil {
			return nil, err
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	d, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &cli{c: c, discovery: d, namespace: namespace, now: time.Now()}, nil
}
