package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
)

func incidentsCommand() command {
	return command{run: func(x *cli, args []string) error {
		ctx := context.Background()
		switch {
		case len(args) == 2 && args[0] == "logs":
			return incidentLogs(ctx, x, args[1])
		case len(args) <= 1:
			pod := ""
			if len(args) == 1 {
				pod = args[0]
			}
			return listIncidents(ctx, x, pod)
		}
		return fmt.Errorf("%w: incidents [POD] | incidents logs NAME", errUsage)
	}}
}

// listIncidents prints the PodIncidents of the namespace (or every
// namespace), of one pod if pod is set, newest failure first.
func listIncidents(ctx context.Context, x *cli, pod string) error {
	list := &debugv1beta1.PodIncidentList{}
	var opts []client.ListOption
	if !x.allNamespaces {
		opts = append(opts, client.InNamespace(x.namespace))
	}
	if err := x.c.List(ctx, list, opts...); err != nil {
		return fmt.Errorf("listing PodIncidents: %w", err)
	}
	items := slices.DeleteFunc(list.Items, func(i debugv1beta1.PodIncident) bool { return pod != "" && i.Spec.Pod.Name != pod })
	if len(items) == 0 {
		what := "No PodIncidents"
		if pod != "" {
			what += " of pod " + pod
		}
		_, err := fmt.Fprintf(x.out, "%s in %s.\n", what, x.where())
		return err
	}
	slices.SortStableFunc(items, func(a, b debugv1beta1.PodIncident) int {
		return b.Spec.LastTime.Compare(a.Spec.LastTime.Time)
	})
	w := tabwriter.NewWriter(x.out, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(w, "NAMESPACE\tNAME\tPOD\tCONTAINER\tREASON\tCOUNT\tEXIT\tLAST\tLOG")
	for _, i := range items {
		exit := "-"
		if f := i.Spec.LastFailure; f != nil {
			exit = strconv.Itoa(int(f.ExitCode))
		}
		log := "-"
		switch {
		case i.Spec.LogTail != "":
			log = fmt.Sprintf("%d lines", strings.Count(strings.TrimSuffix(i.Spec.LogTail, "\n"), "\n")+1)
		case i.Spec.LogError != "":
			log = "none: " + oneLine(i.Spec.LogError, 40)
		}
		_, _ = fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s ago\t%s\n", i.Namespace, i.Name, i.Spec.Pod.Name, orDash(i.Spec.Container, "-"),
			i.Spec.Reason, i.Spec.Count, exit, x.now.Sub(i.Spec.LastTime.Time).Round(time.Second), log)
	}
	return w.Flush()
}

// incidentLogs prints the log tail a PodIncident captured, or why it has
// none; of a record holding several failed instances, each instance's log,
// oldest first, under a line naming it.
func incidentLogs(ctx context.Context, x *cli, name string) error {
	i := &debugv1beta1.PodIncident{}
	if err := x.c.Get(ctx, client.ObjectKey{Namespace: x.namespace, Name: name}, i); err != nil {
		return fmt.Errorf("reading PodIncident %s/%s: %w", x.namespace, name, err)
	}
	if len(i.Spec.Instances) > 1 || slices.ContainsFunc(i.Spec.Instances, func(in debugv1beta1.IncidentInstance) bool {
		return len(in.Artifacts) > 0 || in.ArtifactsError != ""
	}) {
		_, err := fmt.Fprint(x.out, instanceLogs(i.Spec.Instances))
		return err
	}
	if i.Spec.LogTail == "" {
		if i.Spec.LogError != "" {
			return fmt.Errorf("PodIncident %s/%s holds no log: %s", i.Namespace, i.Name, i.Spec.LogError)
		}
		return fmt.Errorf("PodIncident %s/%s holds no log (yet: it is read after the record is written)", i.Namespace, i.Name)
	}
	if _, err := fmt.Fprint(x.out, i.Spec.LogTail); err != nil {
		return err
	}
	if !strings.HasSuffix(i.Spec.LogTail, "\n") {
		_, _ = fmt.Fprintln(x.out)
	}
	if i.Spec.LogTruncated {
		_, _ = fmt.Fprintln(x.out, "(the log was longer: this is its tail)")
	}
	return nil
}

// instanceLogs is each instance's log, oldest first, under a line naming the
// instance, or why it has none, and the artifacts it left.
func instanceLogs(instances []debugv1beta1.IncidentInstance) string {
	var b strings.Builder
	for n, in := range instances {
		fmt.Fprintf(&b, "=== instance %d of %d: exit %d", n+1, len(instances), in.ExitCode)
		if in.Reason != "" {
			fmt.Fprintf(&b, " (%s)", in.Reason)
		}
		fmt.Fprintf(&b, ", finished %s, restart %d, %s ===\n", in.FinishedAt.UTC().Format(time.RFC3339), in.RestartCount, orDash(in.ContainerID, "-"))
		switch {
		case in.LogTail != "":
			b.WriteString(in.LogTail)
			if !strings.HasSuffix(in.LogTail, "\n") {
				b.WriteByte('\n')
			}
			if in.LogTruncated {
				b.WriteString("(the log was longer: this is its tail)\n")
			}
		case in.LogError != "":
			b.WriteString("(no log: " + in.LogError + ")\n")
		default:
			b.WriteString("(no log yet: it is read after the record is written)\n")
		}
		writeArtifacts(&b, in)
	}
	return b.String()
}

// writeArtifacts lists the files an instance left in its artifacts volume:
// each with its size, hash and where its copy is in the pod (the debug
// container mounts the volume at /deckhand-artifacts), or why it was not
// read.
func writeArtifacts(b *strings.Builder, in debugv1beta1.IncidentInstance) {
	for _, f := range in.Artifacts {
		fmt.Fprintf(b, "--- artifact %s: %d bytes", f.Name, f.Size)
		switch {
		case f.Error != "":
			fmt.Fprintf(b, ", %s\n", f.Error)
			continue
		case f.Truncated:
			b.WriteString(" (its start kept)")
		}
		fmt.Fprintf(b, ", sha256 %s", orDash(f.SHA256, "-"))
		if f.Copy != "" {
			fmt.Fprintf(b, ", copy /deckhand-artifacts/%s", f.Copy)
		}
		b.WriteByte('\n')
	}
	if in.ArtifactsError != "" {
		fmt.Fprintf(b, "--- artifacts: %s\n", in.ArtifactsError)
	}
}

// where names what was searched: the namespace, or every namespace.
func (x *cli) where() string {
	if x.allNamespaces {
		return "any namespace"
	}
	return "namespace " + x.namespace
}
