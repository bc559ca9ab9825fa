//go:build bench

// Package cachedesigns measures the designs the scoped cache chooses
// between, side by side in one run (make bench-cache): the switch (an
// informer per needed namespace, one cluster-wide informer with stubs above
// 16), always one cluster-wide informer, and per-namespace informers only.
// For each, at several counts of needed namespaces among NAMESPACES, it
// runs the manager's pod cache (its transform, paging and Need) in a child
// process against envtest and reports the child's peak RSS and CPU, the
// apiserver's pod watches, and the time from start until a handler has been
// told a pod of every needed namespace (what a controller's first reconcile
// waits for).
package cachedesigns

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/manager"
	"github.com/deckhand-dev/deckhand/internal/scopedcache"
	"github.com/deckhand-dev/deckhand/internal/scopedcache/pagedlist"
	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/internal/testenv/proc"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	if os.Getenv("CACHE_DESIGN_CHILD") != "" {
		os.Exit(child())
	}
	if os.Getenv("CACHE_DESIGNS") == "" {
		fmt.Println("cache designs: skipped (CACHE_DESIGNS=1 runs them: make bench-cache)")
		os.Exit(0)
	}
	testenv.Main(m, &env)
}

// designs are the options each design runs with.
var designs = []struct {
	name string
	opts string // ClusterWideAbove, passed to the child
}{
	{"switch (today)", "0"},
	{"always cluster-wide", "-1"},
	{"per namespace only", strconv.Itoa(math.MaxInt)},
}

func envInts(name string, def []int) []int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	var out []int
	for f := range strings.FieldsSeq(strings.ReplaceAll(s, ",", " ")) {
		n, err := strconv.Atoi(f)
		if err != nil {
			panic(fmt.Sprintf("%s=%q: %v", name, s, err))
		}
		out = append(out, n)
	}
	return out
}

// TestBenchCacheDesigns: CACHE_DESIGNS_PODS (10000 100000) pods spread over
// CACHE_DESIGNS_NAMESPACES (2000) namespaces; each design measured with
// CACHE_DESIGNS_NEEDED (1 16 17 200 2000) of them needed.
func TestBenchCacheDesigns(t *testing.T) {
	namespaces := envInts("CACHE_DESIGNS_NAMESPACES", []int{2000})[0]
	needed := envInts("CACHE_DESIGNS_NEEDED", []int{1, 16, 17, 200, 2000})
	created := 0
	var rows []string
	kubeconfig := env.AdminKubeconfig(t)
	for _, pods := range envInts("CACHE_DESIGNS_PODS", []int{10000, 100000}) {
		start := time.Now()
		createPods(t, namespaces, created, pods)
		t.Logf("%d pods in %d namespaces created in %v", pods, namespaces, time.Since(start).Round(time.Second))
		created = pods
		for _, n := range needed {
			if n > namespaces {
				continue
			}
			for _, d := range designs {
				r := runChild(t, kubeconfig, d.opts, n)
				row := fmt.Sprintf("| %d | %d | %s | %d MiB | %.1f s | %d | %.2f s |", pods, n, d.name, r.rssMiB, r.cpu.Seconds(), r.watches, r.ready.Seconds())
				t.Log(row)
				rows = append(rows, row)
			}
		}
	}
	table := "| pods | needed namespaces | design | peak RSS | CPU | pod watches | time to every namespace told |\n|---|---|---|---|---|---|---|\n" + strings.Join(rows, "\n") + "\n"
	fmt.Print(table)
	if out := os.Getenv("CACHE_DESIGNS_OUT"); out != "" {
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out, []byte(table), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func nsName(i int) string { return fmt.Sprintf("cd-%04d", i) }

// createPods makes namespaces (once) and pods from..to, spread evenly, 64
// at a time.
func createPods(t *testing.T, namespaces, from, to int) {
	t.Helper()
	ctx := context.Background()
	var g errgroup.Group
	g.SetLimit(64)
	if from == 0 {
		for i := range namespaces {
			g.Go(func() error {
				return client.IgnoreAlreadyExists(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName(i)}}))
			})
		}
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	for i := from; i < to; i++ {
		g.Go(func() error {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: nsName(i % namespaces), Name: fmt.Sprintf("p-%06d", i),
				Labels: map[string]string{"app": "unrelated"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
			return env.Client.Create(ctx, p)
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

type result struct {
	rssMiB  int
	cpu     time.Duration
	ready   time.Duration
	watches int
}

// runChild runs one design with needed namespaces in a child process,
// scrapes the apiserver's pod watches once the child says it is ready, and
// reads the child's report.
func runChild(t *testing.T, kubeconfig, clusterWideAbove string, needed int) result {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), "CACHE_DESIGN_CHILD=1", "KUBECONFIG="+kubeconfig,
		"CACHE_DESIGN_CLUSTER_WIDE_ABOVE="+clusterWideAbove, "CACHE_DESIGN_NEEDED="+strconv.Itoa(needed))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var r result
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		f := strings.Fields(lines.Text())
		switch {
		case len(f) == 2 && f[0] == "ready":
			d, _ := time.ParseDuration(f[1])
			r.ready = d
			time.Sleep(5 * time.Second) // watches settle
			r.watches = podWatches(t)
			_, _ = io.WriteString(stdin, "done\n")
		case len(f) == 3 && f[0] == "report":
			r.rssMiB, _ = strconv.Atoi(f[1])
			cpu, _ := time.ParseDuration(f[2])
			r.cpu = cpu
			return r
		case len(f) >= 1 && f[0] == "error":
			t.Fatalf("child: %s", lines.Text())
		}
	}
	t.Fatalf("the child ended without a report: %v", lines.Err())
	return r
}

var watchLine = regexp.MustCompile(`^apiserver_longrunning_requests\{[^}]*resource="pods"[^}]*verb="WATCH"[^}]*\} (\d+)`)

// podWatches is the apiserver's count of open pod watches.
func podWatches(t *testing.T) int {
	t.Helper()
	hc, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(strings.TrimSuffix(env.Config.Host, "/") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	n := 0
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		if m := watchLine.FindStringSubmatch(s.Text()); m != nil {
			v, _ := strconv.Atoi(m[1])
			n += v
		}
	}
	return n
}

// child runs the pod cache of one design and reports on stdout: "ready D"
// once a handler was told a pod of every needed namespace, then, after the
// parent says "done", "report RSS_MiB CPU".
func child() int {
	fail := func(err error) int { fmt.Println("error", err); return 1 }
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		return fail(err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	above, _ := strconv.Atoi(os.Getenv("CACHE_DESIGN_CLUSTER_WIDE_ABOVE"))
	n, _ := strconv.Atoi(os.Getenv("CACHE_DESIGN_NEEDED"))
	needed := make([]string, n)
	for i := range n {
		needed[i] = nsName(i)
	}
	opts := cache.Options{Scheme: manager.Scheme, DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: {Transform: manager.SlimPod}}}
	opts.NewInformer = pagedlist.Informers(opts)
	start := time.Now()
	newCache := scopedcache.Options{ClusterWideAbove: above}.New(scopedcache.Need{Object: &corev1.Pod{},
		Namespaces: func(context.Context, client.Reader) ([]string, error) { return needed, nil },
		Expand:     manager.ExpandPod})
	c, err := newCache(cfg, opts)
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inf, err := c.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return fail(err)
	}
	var (
		mu   sync.Mutex
		told = map[string]bool{}
		all  = make(chan struct{})
	)
	want := map[string]bool{}
	for _, ns := range needed {
		want[ns] = true
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		p, ok := obj.(client.Object)
		if !ok || !want[p.GetNamespace()] {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !told[p.GetNamespace()] {
			told[p.GetNamespace()] = true
			if len(told) == len(want) {
				close(all)
			}
		}
	}}); err != nil {
		return fail(err)
	}
	go func() { _ = c.Start(ctx) }()
	select {
	case <-all:
	case <-time.After(20 * time.Minute):
		return fail(fmt.Errorf("not every needed namespace told in 20 minutes"))
	}
	fmt.Println("ready", time.Since(start).Round(time.Millisecond))
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	rss, cpu, err := self()
	if err != nil {
		return fail(err)
	}
	fmt.Println("report", rss>>20, cpu)
	return 0
}

// self reads this process's peak RSS and CPU time from /proc.
func self() (rss int64, cpu time.Duration, err error) {
	rss, err = proc.StatusBytes(proc.Self, "VmHWM")
	st, err2 := proc.ReadStat(proc.Self)
	return rss, st.CPU, errors.Join(err, err2)
}
