package manager_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/internal/version"
)

// The files whose queries name metrics, relative to the repository root.
const (
	alertsFile    = "config/prometheus/alerts.yaml"
	dashboardFile = "config/grafana/deckhand-dashboard.json"
	runbooksFile  = "docs/operations/runbooks.md"
)

// Every metric the alert rules and the dashboard query is one a running
// manager exports: the test runs one with every controller, webhooks and
// leader election, gives each kind an object and some work, gathers what it
// exports and compares names.
func TestAlertsAndDashboardQueryExportedMetrics(t *testing.T) {
	exported := exportedMetrics(t)
	// The metrics reference (generated from where metrics are declared)
	// names each of Deckhand's the manager exports.
	reference, err := os.ReadFile(filepath.Join("..", "..", "docs", "reference", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	for name := range exported {
		if strings.HasPrefix(name, "deckhand_") && !strings.HasSuffix(name, "_bucket") && !strings.HasSuffix(name, "_sum") &&
			!strings.HasSuffix(name, "_count") && !strings.Contains(string(reference), "| `"+name+"` |") {
			t.Errorf("docs/reference/metrics.md does not name %s, which the manager exports", name)
		}
	}
	queries := map[string][]string{alertsFile: alertQueries(t), dashboardFile: dashboardQueries(t)}
	for file, exprs := range queries {
		if len(exprs) == 0 {
			t.Fatalf("%s: no queries found", file)
		}
		for _, expr := range exprs {
			for _, name := range metricNames(expr) {
				if !exported[name] {
					t.Errorf("%s: the query %q names %s, a metric Deckhand does not export", file, expr, name)
				}
			}
		}
	}
}

// exportedMetrics returns the names a manager's /metrics shows once every
// kind has had something to do; a histogram's as its _bucket, _sum and
// _count series. Prometheus adds "up" to every target itself.
func exportedMetrics(t *testing.T) map[string]bool {
	g := testenv.NewG(t)
	ctx := context.Background()
	ns := env.NamespaceWithLabels(t, map[string]string{debugv1beta1.NamespaceEnabledLabel: "true"})
	opts := env.ManagerOptions()
	opts.LeaderElect = true
	opts.Namespace = ns
	opts.PodBuggerAllowedImages = []string{"docker.io/library/busybox:*"}
	env.StartManager(t, opts)

	objs := []client.Object{
		&appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ps"}, Spec: appsv1beta1.PodSetSpec{Replicas: 1}},
		decodeInto(t, &modelv1.ModelBox{}, "{metadata: {name: mb}, spec: {image: 'nginx:1.27', ports: [{port: 80}]}}"),
		decodeInto(t, &deckhandbatchv1.JobWatcher{}, "{metadata: {name: jw}, spec: {ttlSecondsAfterSucceeded: 0}}"),
		decodeInto(t, &debugv1beta1.PodBugger{}, "{metadata: {name: pb}, spec: {selector: {matchLabels: {app: web}}, image: 'docker.io/library/busybox:1.37', triggers: [Running, Error]}}"),
	}
	for _, o := range objs {
		o.SetNamespace(ns)
		env.Create(t, o)
	}
	// A Job that succeeded a minute ago (the JobWatcher deletes it) and a
	// running pod (the PodBugger debugs it).
	job := decodeInto(t, &batchv1.Job{}, "{metadata: {name: done}, spec: {template: {spec: {restartPolicy: Never, containers: [{name: main, image: busybox}]}}}}")
	job.Namespace = ns
	env.Create(t, job)
	finished := metav1.NewTime(time.Now().Add(-time.Minute))
	job.Status = batchv1.JobStatus{StartTime: &finished, CompletionTime: &finished, Succeeded: 1, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: finished},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: finished},
	}}
	g.Expect(env.Client.Status().Update(ctx, job)).To(Succeed())
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}
	env.Create(t, pod)
	pod.Status.Phase = corev1.PodRunning
	// Its container failed once: the PodBugger records an incident.
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Image: "pause", ImageID: "pause",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: finished}}}}
	g.Expect(env.Client.Status().Update(ctx, pod)).To(Succeed())

	// Each kind's work shows in its own metric.
	for name, labels := range map[string]map[string]string{
		"deckhand_podset_pods_created_total":                    {"namespace": ns},
		"deckhand_modelbox_child_writes_total":                  {"namespace": ns},
		"deckhand_jobwatcher_jobs_deleted_total":                {"watcher_namespace": ns, "result": "deleted"},
		"deckhand_podbugger_injections_total":                   {"namespace": ns, "result": "added"},
		"deckhand_podbugger_incidents_total":                    {"namespace": ns, "reason": "Error"},
		"deckhand_status_condition":                             {"namespace": ns, "kind": "PodBugger"},
		"deckhand_jobwatcher_expired_jobs":                      {"watcher_namespace": ns},
		"leader_election_master_status":                         {"name": opts.LeaderElectionID},
		"deckhand_webhook_certificate_expiry_timestamp_seconds": nil,
		"deckhand_build_info":                                   {"version": version.Version},
	} {
		g.Eventually(func() (int, error) { return testenv.MetricSeries(name, labels) }).Should(BeNumerically(">", 0), name)
	}

	// Scaled down, the PodSet deletes its pod.
	g.Expect(env.Update(objs[0], func() { objs[0].(*appsv1beta1.PodSet).Spec.Replicas = 0 })).To(Succeed())
	g.Eventually(func() (int, error) {
		return testenv.MetricSeries("deckhand_podset_pods_deleted_total", map[string]string{"namespace": ns})
	}).Should(BeNumerically(">", 0))

	families, err := metrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	names := map[string]bool{"up": true}
	for _, f := range families {
		names[f.GetName()] = true
		if f.GetType().String() == "HISTOGRAM" {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				names[f.GetName()+suffix] = true
			}
		}
	}
	return names
}

func decodeInto[T client.Object](t *testing.T, obj T, doc string) T {
	t.Helper()
	if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
		t.Fatalf("decoding %s: %v", doc, err)
	}
	return obj
}

// rulesFile is what the test reads of a Prometheus rules file.
type rulesFile struct {
	Groups []struct {
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

func readRules(t *testing.T) rulesFile {
	t.Helper()
	var f rulesFile
	if err := yaml.Unmarshal(readRepoFile(t, alertsFile), &f); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	return f
}

func alertQueries(t *testing.T) []string {
	var out []string
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			out = append(out, r.Expr)
		}
	}
	return out
}

// dashboardQueries returns the expressions of every panel's targets, and
// of the templating variables' queries; the dashboard must be valid JSON.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	var d struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(readRepoFile(t, dashboardFile), &d); err != nil {
		t.Fatalf("%s is not valid JSON: %v", dashboardFile, err)
	}
	var out []string
	for _, p := range d.Panels {
		for _, target := range p.Targets {
			out = append(out, target.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if m := regexp.MustCompile(`^label_values\((\w+)`).FindStringSubmatch(v.Definition); m != nil {
			out = append(out, m[1])
		}
	}
	return out
}

func readRepoFile(t *testing.T, path string) []byte {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

var (
	// What in a PromQL expression is not a metric name: label matchers,
	// strings, ranges, grouping clauses and Grafana variables.
	promqlNoise = regexp.MustCompile(`\{[^}]*\}|"[^"]*"|\[[^\]]*\]|\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)|\$\w+`)
	identifier  = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*\s*\(?`)
	keywords    = []string{"and", "or", "unless", "bool", "offset", "inf", "nan"}
)

// metricNames returns the metric names expr selects: its identifiers that
// are neither functions, aggregations nor keywords.
func metricNames(expr string) []string {
	var out []string
	for _, m := range identifier.FindAllString(promqlNoise.ReplaceAllString(expr, " "), -1) {
		m = strings.TrimSpace(m)
		if strings.HasSuffix(m, "(") || slices.Contains(keywords, strings.ToLower(m)) {
			continue
		}
		out = append(out, m)
	}
	return out
}

func TestMetricNames(t *testing.T) {
	tests := map[string][]string{
		`absent(up{job="x"} == 1)`: {"up"},
		`sum by (controller) (rate(controller_runtime_reconcile_errors_total{job="x"}[5m])) / sum by (controller) (rate(controller_runtime_reconcile_total[5m])) > 0.1`: {"controller_runtime_reconcile_errors_total", "controller_runtime_reconcile_total"},
		`histogram_quantile(0.99, sum by (le) (rate(a_bucket[$__rate_interval])))`:                                                                                      {"a_bucket"},
		`sum(up) > 0 unless sum(b{name="c"}) > 0`:                                          {"up", "b"},
		`min(deckhand_webhook_certificate_expiry_timestamp_seconds) - time() < 21 * 86400`: {"deckhand_webhook_certificate_expiry_timestamp_seconds"},
		`count(x{kind="PodSet"} == 1) or vector(0)`:                                        {"x"},
	}
	for expr, want := range tests {
		if got := metricNames(expr); !slices.Equal(got, want) {
			t.Errorf("metricNames(%q) = %q, want %q", expr, got, want)
		}
	}
}

// Every alert has a runbook_url that points at its own section of
// docs/operations/runbooks.md.
func TestEveryAlertHasARunbook(t *testing.T) {
	runbooks := string(readRepoFile(t, runbooksFile))
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (\S+)\s*$`).FindAllStringSubmatch(runbooks, -1) {
		anchors[strings.ToLower(m[1])] = true
	}
	const base = "https://github.com/deckhand-dev/deckhand/blob/main/" + runbooksFile + "#"
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			url := r.Annotations["runbook_url"]
			if url != base+strings.ToLower(r.Alert) {
				t.Errorf("alert %s: runbook_url %q, want %q", r.Alert, url, base+strings.ToLower(r.Alert))
			}
			if !anchors[strings.ToLower(r.Alert)] {
				t.Errorf("alert %s: %s has no section \"## %s\"", r.Alert, runbooksFile, r.Alert)
			}
		}
	}
}

// Every metric of Deckhand's own an alert fires on is in a user page's
// metrics table, where the on-call engineer looks it up.
func TestEveryAlertedMetricIsDocumented(t *testing.T) {
	var pages strings.Builder
	for _, dir := range []string{"docs/guides", "docs/operations"} {
		matches, err := filepath.Glob(filepath.Join("..", "..", dir, "*.md"))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range matches {
			data, err := os.ReadFile(m)
			if err != nil {
				t.Fatal(err)
			}
			pages.Write(data)
		}
	}
	missing := map[string]bool{}
	for _, expr := range alertQueries(t) {
		for _, name := range metricNames(expr) {
			if strings.HasPrefix(name, "deckhand_") && !strings.Contains(pages.String(), "| `"+name+"`") {
				missing[name] = true
			}
		}
	}
	for name := range missing {
		t.Errorf("the alerts query %s, which no metrics table in docs/guides or docs/operations lists", name)
	}
}
