//go:build bench

package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/internal/testenv/proc"
	"github.com/deckhand-dev/deckhand/test/cluster"
)

// bench is one run: the cluster, the manager under test and the report.
type bench struct {
	t   *testing.T
	c   *cluster.Cluster
	s   settings
	rep *report
	ctx context.Context

	mgr   *managerProcess
	token string // allowed to read the manager's /metrics
	bin   string // the manager binary under test
	nodes []string
	seq   atomic.Int64
}

// managerProcess is the manager binary running against the cluster, with
// its metrics served where the bench can scrape them.
type managerProcess struct {
	p          *cluster.Process
	metricsURL string
	pprofURL   string // Go's /debug/pprof/, on loopback
}

const benchImage = "registry.k8s.io/pause:3.10"

// setup gives the bench a token that may read the manager's metrics, and
// the names of the nodes (pods placed on them directly skip the scheduler).
func (b *bench) setup() {
	ctx := b.ctx
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: "bench-scraper"}}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "bench-metrics-reader"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bench-metrics-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}}}
	b.must(b.c.Client.Create(ctx, sa))
	b.must(b.c.Client.Create(ctx, role))
	b.must(b.c.Client.Create(ctx, binding))
	tr, err := b.c.Clientset.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)}}, metav1.CreateOptions{})
	b.must(err)
	b.token = tr.Status.Token
	nodes, err := b.c.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
	b.must(err)
	for _, n := range nodes.Items {
		b.nodes = append(b.nodes, n.Name)
	}
}

// perRound is an empty series of one figure a round.
func (b *bench) perRound() []float64 { return make([]float64, 0, b.s.repeat) }

func (b *bench) must(err error) {
	b.t.Helper()
	if err != nil {
		b.t.Fatal(err)
	}
}

// startManager runs bin/deckhand with every controller, metrics on a
// loopback port and production-level logging, until the run ends.
func (b *bench) startManager() *managerProcess {
	addr, pprof := testenv.FreeAddr(b.t), testenv.FreeAddr(b.t)
	p := b.c.RunManager(b.t,
		"--metrics-bind-address", addr,
		"--pprof-bind-address", pprof,
		"--podbugger-allowed-images", "docker.io/library/busybox:*",
		"--zap-log-level", "info",
		// Timestamps to the microsecond, to tell the phases of a start
		// apart (the backlog round keeps its manager's log).
		"--zap-time-encoding", "rfc3339nano")
	m := &managerProcess{p: p, metricsURL: "https://" + addr + "/metrics", pprofURL: "http://" + pprof + "/debug/pprof/"}
	// The first scrape waits for the metrics server.
	b.must(wait.PollUntilContextTimeout(b.ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		_, err := b.scrape(m)
		return err == nil, nil
	}))
	return m
}

// metrics is a scraped Prometheus text exposition.
type metrics []sample

type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var labelRE = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)

func parseMetrics(body []byte) metrics {
	var out metrics
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		head := line[:i]
		s := sample{labels: map[string]string{}, value: v}
		if j := strings.IndexByte(head, '{'); j >= 0 {
			s.name = head[:j]
			for _, m := range labelRE.FindAllStringSubmatch(head[j:], -1) {
				s.labels[m[1]] = m[2]
			}
		} else {
			s.name = head
		}
		out = append(out, s)
	}
	return out
}

// sum adds the samples named name whose labels pass match (nil: all).
func (m metrics) sum(name string, match func(map[string]string) bool) float64 {
	total := 0.0
	for _, s := range m {
		if s.name == name && (match == nil || match(s.labels)) {
			total += s.value
		}
	}
	return total
}

func label(key string, values ...string) func(map[string]string) bool {
	return func(l map[string]string) bool {
		for _, v := range values {
			if l[key] == v {
				return true
			}
		}
		return false
	}
}

var writeMethods = []string{"POST", "PUT", "PATCH", "DELETE"}

// scrape reads the manager's /metrics with the bench's token. Its
// authentication and authorization reviews are cached by the manager for a
// minute: scrapes less than a minute apart cost the manager no request.
func (b *bench) scrape(m *managerProcess) (metrics, error) {
	req, err := http.NewRequest(http.MethodGet, m.metricsURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+b.token)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // the manager's self-signed metrics certificate
	}}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping %s: %s: %s", m.metricsURL, resp.Status, body)
	}
	return parseMetrics(body), nil
}

func (b *bench) mustScrape(m *managerProcess) metrics {
	b.t.Helper()
	out, err := b.scrape(m)
	b.must(err)
	return out
}

// apiserverMetrics scrapes the apiserver's own /metrics as cluster admin.
func (b *bench) apiserverMetrics() metrics {
	b.t.Helper()
	body, err := b.c.Clientset.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(b.ctx)
	b.must(err)
	return parseMetrics(body)
}

// rssMiB is the resident memory of a process, from /proc/<pid>/status.
func rssMiB(pid int) (float64, error) { return procStatusMiB(pid, "VmRSS") }

// procStatusMiB reads one memory field of /proc/<pid>/status, in MiB:
// VmRSS is all resident memory, RssAnon the part that is the process's own
// (heap, stacks), RssFile its binary's pages (page cache it shares).
func procStatusMiB(pid int, field string) (float64, error) {
	b, err := proc.StatusBytes(pid, field)
	return float64(b) / (1 << 20), err
}

// cpuSeconds is the CPU time (user and system) the process has used, to
// the kernel's tick of 1/100 s.
func cpuSeconds(pid int) (float64, error) {
	st, err := proc.ReadStat(pid)
	return st.CPU.Seconds(), err
}

// processOf finds the pid of the cluster's process whose command line
// contains every one of parts.
func (b *bench) processOf(parts ...string) int {
	pid, err := proc.Find(parts...)
	b.must(err)
	if pid == 0 {
		b.t.Fatalf("no process with %q in its command line", parts)
	}
	return pid
}

// cpuMark is what the processes sharing the machine's cores, and the cores
// themselves, had used in CPU time when it was taken: so that a phase's
// wall time can be told apart into who worked during it.
type cpuMark struct {
	at   time.Time
	pids map[string]int
	secs map[string]float64
	busy float64 // the machine's busy core-seconds (/proc/stat)
}

// cpuUse is what a phase cost in CPU: each process's core-seconds (a
// process started during the phase counts from its start) and how many of
// the machine's cores were busy on average.
type cpuUse struct {
	secs      map[string]float64
	busyCores float64
}

// cpuProcesses are the processes a phase's CPU is told for: the control
// plane's, the manager's (when it runs) and the bench's own (its informers
// and clients).
func (b *bench) cpuProcesses(manager *managerProcess) map[string]int {
	out := map[string]int{"bench": os.Getpid()}
	for name, bin := range map[string]string{"kube-apiserver": "/bin/kube-apiserver", "etcd": "/bin/etcd", "kube-controller-manager": "/bin/kube-controller-manager"} {
		pid, err := proc.Find(bin, b.c.Name)
		b.must(err)
		if pid != 0 {
			out[name] = pid
		}
	}
	if manager != nil && !manager.p.Exited() {
		out["manager"] = manager.p.Pid()
	}
	return out
}

// markCPU takes a cpuMark of procs.
func (b *bench) markCPU(procs map[string]int) cpuMark {
	m := cpuMark{at: time.Now(), pids: procs, secs: map[string]float64{}}
	for name, pid := range procs {
		s, err := cpuSeconds(pid)
		b.must(err)
		m.secs[name] = s
	}
	busy, err := machineBusy()
	b.must(err)
	m.busy = busy
	return m
}

// cpuSince is what procs used since m.
func (b *bench) cpuSince(m cpuMark, procs map[string]int) cpuUse {
	now := b.markCPU(procs)
	u := cpuUse{secs: map[string]float64{}, busyCores: (now.busy - m.busy) / now.at.Sub(m.at).Seconds()}
	for name, pid := range procs {
		before := 0.0
		if m.pids[name] == pid {
			before = m.secs[name]
		}
		u.secs[name] = now.secs[name] - before
	}
	return u
}

// String lists the processes' core-seconds, most first.
func (u cpuUse) String() string {
	names := slices.Collect(maps.Keys(u.secs))
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(u.secs[b], u.secs[a]) })
	parts := make([]string, 0, len(names)+1)
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %.2f", n, u.secs[n]))
	}
	return strings.Join(append(parts, fmt.Sprintf("(cores busy %.2f)", u.busyCores)), ", ")
}

// machineBusy is how long the machine's cores have been busy, in
// core-seconds: /proc/stat's first line less its idle and iowait, in
// USER_HZ (1/100 s).
func machineBusy() (float64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	if len(fields) < 6 || fields[0] != "cpu" {
		return 0, fmt.Errorf("unexpected /proc/stat: %q", line)
	}
	var busy float64
	for i, f := range fields[1:] {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return 0, err
		}
		switch i {
		case 0, 1, 2, 5, 6: // user, nice, system, irq, softirq (guest is in user; steal is not ours)
			busy += v
		}
	}
	return busy / 100, nil
}

// namespace creates a fresh namespace with the given labels.
func (b *bench) namespace(prefix string, labels map[string]string) string {
	b.t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, b.seq.Add(1)), Labels: labels}}
	b.must(b.c.Client.Create(b.ctx, ns))
	return ns.Name
}

// dropNamespace deletes a namespace and waits until it is gone, so that its
// garbage does not load the cluster during the next measurement.
func (b *bench) dropNamespace(name string) {
	b.t.Helper()
	err := b.c.Clientset.CoreV1().Namespaces().Delete(b.ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	b.must(err)
	err = wait.PollUntilContextTimeout(b.ctx, time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := b.c.Clientset.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		b.t.Fatalf("namespace %s not gone after 10 minutes: %v", name, err)
	}
}

// parallel runs do(i) for i in [0, n) on workers goroutines and returns the
// first error.
func parallel(n, workers int, do func(i int) error) error {
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := do(i); err != nil {
					errOnce.Do(func() { first = err })
				}
			}
		})
	}
	wg.Wait()
	return first
}

// benchPod is a pod as a Deployment would make it: a couple of labels, one
// container with an image, a command, environment and resources.
func benchPod(ns, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       benchPodSpec(),
	}
}

func benchPodSpec() corev1.PodSpec {
	return corev1.PodSpec{
		Containers: []corev1.Container{{
			Name:    "app",
			Image:   benchImage,
			Command: []string{"/pause"},
			Env:     []corev1.EnvVar{{Name: "MODE", Value: "bench"}, {Name: "LOG_LEVEL", Value: "info"}},
			Ports:   []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		}},
		TerminationGracePeriodSeconds: ptr.To[int64](0),
	}
}

// createPods creates n pods named prefix-i in ns from 64 parallel clients,
// each placed on a node (round robin) unless schedule is set, in which case
// the scheduler places them.
func (b *bench) createPods(ns, prefix string, n int, labels map[string]string, schedule bool) {
	b.t.Helper()
	b.must(parallel(n, 64, func(i int) error {
		pod := benchPod(ns, fmt.Sprintf("%s-%d", prefix, i), labels)
		if !schedule {
			pod.Spec.NodeName = b.nodes[i%len(b.nodes)]
		}
		_, err := b.c.Clientset.CoreV1().Pods(ns).Create(b.ctx, pod, metav1.CreateOptions{})
		return err
	}))
}

// waitRunning waits until no pod in ns is anything but Running.
func (b *bench) waitRunning(ns string, want int) {
	b.t.Helper()
	err := wait.PollUntilContextTimeout(b.ctx, 2*time.Second, 15*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := b.c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Running", ResourceVersion: "0"})
		if err != nil {
			return false, nil
		}
		return len(list.Items) >= want, nil
	})
	if err != nil {
		b.t.Fatalf("%d pods in %s not Running after 15 minutes: %v", want, ns, err)
	}
}

// percentile of sorted-or-not values, nearest rank.
func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	rank := int(p/100*float64(len(s))+0.999999) - 1
	return s[max(0, min(rank, len(s)-1))]
}
