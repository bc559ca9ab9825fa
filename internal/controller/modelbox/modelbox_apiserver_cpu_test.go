package modelbox_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
	modelboxcontroller "github.com/deckhand-dev/deckhand/internal/controller/modelbox"
	"github.com/deckhand-dev/deckhand/internal/manager"
	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/internal/testenv/proc"
)

// TestApiserverCPUPerModelBox measures where the envtest kube-apiserver's
// CPU goes per ModelBox (issue 26), side by side with the same Deployments
// and Services made directly. It is a measurement, not a check: it runs
// only with MODELBOX_CPU_PROFILE=<dir>, which receives one CPU profile of
// the apiserver per side (go tool pprof -top <dir>/<side>.pb.gz), and it
// logs the apiserver process's CPU seconds (/proc/<pid>/stat) per side and
// per box. Every side runs in the same fixed window (MODELBOX_CPU_WINDOW
// seconds, 40 by default), so the apiserver's idle work weighs the same in
// each; the "idle" side measures it. MODELBOX_CPU_BOXES (200: envtest has 254
// ClusterIPs) boxes a side.
//
//	MODELBOX_CPU_PROFILE=/tmp/mbprof go test ./internal/controller/modelbox/ \
//	  -run TestApiserverCPUPerModelBox -count=1 -v -timeout 30m
func TestApiserverCPUPerModelBox(t *testing.T) {
	dir := os.Getenv("MODELBOX_CPU_PROFILE")
	if dir == "" {
		t.Skip("a measurement: set MODELBOX_CPU_PROFILE to a directory for the profiles")
	}
	g := testenv.NewG(t)
	g.Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	boxes := envInt("MODELBOX_CPU_BOXES", 200)
	window := time.Duration(envInt("MODELBOX_CPU_WINDOW", 40)) * time.Second
	pid, err := apiserverPID()
	g.Expect(err).NotTo(HaveOccurred())

	// The test's own client, unthrottled, as the bench's direct side is.
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.New(cfg, client.Options{Scheme: manager.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	hc, err := rest.HTTPClientFor(env.Config)
	g.Expect(err).NotTo(HaveOccurred())

	type result struct {
		side      string
		cpu, done time.Duration
	}
	var results []result
	measure := func(side string, run func() time.Duration) {
		t.Helper()
		before, err := processCPU(pid)
		g.Expect(err).NotTo(HaveOccurred())
		profiled := make(chan error, 1)
		go func() { profiled <- saveProfile(hc, env.Config.Host, window, filepath.Join(dir, side+".pb.gz")) }()
		start := time.Now()
		done := run()
		g.Expect(time.Since(start)).To(BeNumerically("<", window), "side %s did not end within the window", side)
		g.Expect(<-profiled).To(Succeed())
		after, err := processCPU(pid)
		g.Expect(err).NotTo(HaveOccurred())
		results = append(results, result{side, after - before, done})
		t.Logf("%-16s apiserver CPU %6.2f s in %s (%.1f ms a box), done after %s", side, (after - before).Seconds(), window,
			float64((after-before).Milliseconds())/float64(boxes), done.Round(10*time.Millisecond))
	}

	measure("idle", func() time.Duration { return 0 })

	// The ModelBox side: the manager makes the children, the test plays
	// the Deployment controller, until every box is Available.
	nsBox := env.Namespace(t)
	counter := &requestCounter{namespace: nsBox, counts: map[string]int{}}
	mgrCfg := rest.CopyConfig(env.Config)
	mgrCfg.Wrap(counter.wrap)
	mgr, stopManager := env.StartManagerWithConfig(t, mgrCfg, env.ManagerOptions())
	g.Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue())
	var template modelv1.ModelBoxStatus
	measure("modelbox", func() time.Duration {
		start := time.Now()
		parallel(boxes, func(i int) error { return c.Create(ctx, benchBox(nsBox, i)) })
		playUntilAvailable(g, c, nsBox, boxes, func() (int, error) {
			var list modelv1.ModelBoxList
			if err := c.List(ctx, &list, client.InNamespace(nsBox)); err != nil {
				return 0, err
			}
			n := 0
			for _, b := range list.Items {
				if meta.IsStatusConditionTrue(b.Status.Conditions, modelv1.ConditionAvailable) {
					n++
					template = b.Status
				}
			}
			return n, nil
		})
		return time.Since(start)
	})
	stopManager()
	logPerBox(t, counter, boxes)
	freeClusterIPs(g, c, nsBox)

	// The same Deployments and Services, created, and applied, directly.
	children := func(ns string, i int) []client.Object {
		box := benchBox(ns, i)
		acs, err := modelboxcontroller.ChildrenFor(box, nil)
		g.Expect(err).NotTo(HaveOccurred())
		d, s := &appsv1.Deployment{}, &corev1.Service{}
		for j, obj := range []client.Object{d, s} {
			data, err := json.Marshal(acs[j])
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(json.Unmarshal(data, obj)).To(Succeed())
			obj.SetOwnerReferences(nil)
		}
		return []client.Object{d, s}
	}
	applied := func(ns string, i int) []runtime.ApplyConfiguration {
		acs, err := modelboxcontroller.ChildrenFor(benchBox(ns, i), nil)
		g.Expect(err).NotTo(HaveOccurred())
		acs[0].(*appsv1ac.DeploymentApplyConfiguration).OwnerReferences = nil
		acs[1].(*corev1ac.ServiceApplyConfiguration).OwnerReferences = nil
		return acs[:2]
	}
	deploymentsAvailable := func(ns string) func() (int, error) {
		return func() (int, error) {
			var list appsv1.DeploymentList
			err := c.List(ctx, &list, client.InNamespace(ns))
			n := 0
			for _, d := range list.Items {
				if d.Status.AvailableReplicas == 1 {
					n++
				}
			}
			return n, err
		}
	}
	for _, side := range []string{"direct-create", "direct-apply"} {
		ns := env.Namespace(t)
		measure(side, func() time.Duration {
			start := time.Now()
			parallel(boxes, func(i int) error {
				if side == "direct-apply" {
					// What the manager applies, without the owner.
					for _, ac := range applied(ns, i) {
						if err := c.Apply(ctx, ac, client.FieldOwner(modelboxcontroller.FieldManager), client.ForceOwnership); err != nil {
							return err
						}
					}
					return nil
				}
				for _, obj := range children(ns, i) {
					if err := c.Create(ctx, obj); err != nil {
						return err
					}
				}
				return nil
			})
			playUntilAvailable(g, c, ns, boxes, deploymentsAvailable(ns))
			return time.Since(start)
		})
		freeClusterIPs(g, c, ns)
	}

	// What the ModelBox side sends beyond: its create alone, and one status
	// write of an Available status (as the manager writes it: a JSON patch
	// replacing the whole status) to each box.
	nsOnly := env.Namespace(t)
	measure("modelbox-create", func() time.Duration {
		start := time.Now()
		parallel(boxes, func(i int) error { return c.Create(ctx, benchBox(nsOnly, i)) })
		return time.Since(start)
	})
	measure("modelbox-status", func() time.Duration {
		start := time.Now()
		parallel(boxes, func(i int) error {
			st := template.DeepCopy()
			st.ObservedGeneration = 1
			patch, err := json.Marshal([]map[string]any{{"op": "replace", "path": "/status", "value": st}})
			if err != nil {
				return err
			}
			box := &modelv1.ModelBox{ObjectMeta: metav1.ObjectMeta{Namespace: nsOnly, Name: fmt.Sprintf("box-%d", i)}}
			return c.Status().Patch(ctx, box, client.RawPatch(types.JSONPatchType, patch))
		})
		return time.Since(start)
	})

	idle := results[0].cpu
	for _, r := range results[1:] {
		t.Logf("%-16s beyond idle: %6.2f s, %.1f ms a box", r.side, (r.cpu - idle).Seconds(), float64((r.cpu-idle).Microseconds())/1000/float64(boxes))
	}
}

// logPerBox logs the manager's requests per ModelBox.
func logPerBox(t *testing.T, counter *requestCounter, boxes int) {
	per := counter.perBox(boxes)
	keys := make([]string, 0, len(per))
	for k := range per {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		t.Logf("manager's requests per ModelBox: %-28s %.2f", k, per[k])
	}
}

// freeClusterIPs deletes the Services of ns: envtest's Service range has
// 254 addresses, and its namespaces are never emptied (no namespace
// controller).
func freeClusterIPs(g Gomega, c client.Client, ns string) {
	var list corev1.ServiceList
	g.Expect(c.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	parallel(len(list.Items), func(i int) error { return client.IgnoreNotFound(c.Delete(ctx, &list.Items[i])) })
	time.Sleep(2 * time.Second)
}

// benchBox is the bench's ModelBox: one replica, one port.
func benchBox(ns string, i int) *modelv1.ModelBox {
	return &modelv1.ModelBox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("box-%d", i)},
		Spec: modelv1.ModelBoxSpec{Name: "model", Image: "nginx:1.27", Replicas: ptr.To[int32](1),
			Ports: []modelv1.ServicePort{{Port: 80}}},
	}
}

// parallel runs do for 0..n-1 on 16 workers, the manager's ModelBox
// workers, and panics on the first error (a measurement cannot go on).
func parallel(n int, do func(i int) error) {
	work := make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				if err := do(i); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		panic(err)
	}
}

// playUntilAvailable plays the Deployment controller every 250 ms until
// ready counts n.
func playUntilAvailable(g Gomega, c client.Client, ns string, n int, ready func() (int, error)) {
	started := map[string]time.Time{}
	g.Eventually(func() (int, error) {
		playDeploymentController(g, c, ns, 300*time.Millisecond, started)
		return ready()
	}).WithTimeout(5 * time.Minute).WithPolling(250 * time.Millisecond).Should(Equal(n))
}

// saveProfile writes a CPU profile of the apiserver at host over window.
func saveProfile(hc *http.Client, host string, window time.Duration, path string) error {
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", strings.TrimSuffix(host, "/"), int(window.Seconds()))
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// apiserverPID finds envtest's kube-apiserver: a child of this process.
func apiserverPID() (int, error) {
	pids, err := proc.Children(os.Getpid(), "kube-apiserver")
	if err != nil || len(pids) == 0 {
		return 0, errors.Join(err, fmt.Errorf("no kube-apiserver child of process %d", os.Getpid()))
	}
	return pids[0], nil
}

// processCPU is the user and system CPU time of pid (clock ticks of 10 ms).
func processCPU(pid int) (time.Duration, error) {
	st, err := proc.ReadStat(pid)
	return st.CPU, err
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
