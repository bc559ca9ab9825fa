package clusterfaults

import (
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"
)

// PrintTable prints the rows in the columns of test/faults' table, then
// each row's figures and violations; and writes the same to the file
// $FAULTS_CLUSTER_TABLE names, if any.
func PrintTable(rows []Result) {
	var out io.Writer = os.Stdout
	if path := os.Getenv("FAULTS_CLUSTER_TABLE"); path != "" {
		if f, err := os.Create(path); err == nil {
			defer func() { _ = f.Close() }()
			out = io.MultiWriter(os.Stdout, f)
		}
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintln(w, "SCENARIO (LOCAL CLUSTER)\tFAULTS\tKILLS\tVIOLATIONS\tTIME")
	for _, r := range rows {
		_, _ = fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\n", r.Scenario, r.Faults, r.Kills, len(r.Violations), r.Took.Round(time.Second))
	}
	_ = w.Flush()
	for _, r := range rows {
		_, _ = fmt.Fprintf(out, "FIGURES %s, %s: %s\n", r.Scenario, r.Faults, r.Figures)
		for _, v := range r.Violations {
			_, _ = fmt.Fprintf(out, "VIOLATION %s: %s\n", r.Scenario, v)
		}
	}
}
