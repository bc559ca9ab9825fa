//go:build bench

package bench

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
	"github.com/deckhand-dev/deckhand/internal/scopedcache"
)

var benchLabels = map[string]string{"app": "bench"}

func benchTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: benchLabels}, Spec: benchPodSpec()}
}

// podTracker follows the pods of one namespace through an informer.
type podTracker struct {
	mu                     sync.Mutex
	start                  time.Time
	want                   int
	seen, alive, running   map[types.UID]bool
	injected               map[types.UID]bool
	maxAlive               int
	firstCreated           time.Duration
	allCreated, allRunning time.Duration
	allInjected            time.Duration
	stop                   chan struct{}
}

func (b *bench) trackPods(ns string, want int) *podTracker {
	tr := &podTracker{want: want, seen: map[types.UID]bool{}, alive: map[types.UID]bool{}, running: map[types.UID]bool{},
		injected: map[types.UID]bool{}, stop: make(chan struct{})}
	f := informers.NewSharedInformerFactoryWithOptions(b.c.Clientset, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { tr.observe(o.(*corev1.Pod), false) },
		UpdateFunc: func(_, o any) { tr.observe(o.(*corev1.Pod), false) },
		DeleteFunc: func(o any) {
			if p, ok := o.(*corev1.Pod); ok {
				tr.observe(p, true)
			} else if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				if p, ok := d.Obj.(*corev1.Pod); ok {
					tr.observe(p, true)
				}
			}
		},
	})
	b.must(err)
	f.Start(tr.stop)
	f.WaitForCacheSync(tr.stop)
	return tr
}

// begin starts the clock; pods seen before count as existing already.
func (tr *podTracker) begin() {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.start = time.Now()
}

func (tr *podTracker) observe(p *corev1.Pod, deleted bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	since := time.Since(tr.start)
	if len(tr.seen) == 0 {
		tr.firstCreated = since
	}
	tr.seen[p.UID] = true
	gone := deleted || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	setIf(tr.alive, p.UID, !gone)
	setIf(tr.running, p.UID, !gone && p.Status.Phase == corev1.PodRunning)
	setIf(tr.injected, p.UID, !deleted && len(p.Spec.EphemeralContainers) > 0)
	tr.maxAlive = max(tr.maxAlive, len(tr.alive))
	if tr.allCreated == 0 && len(tr.seen) >= tr.want {
		tr.allCreated = since
	}
	if tr.allRunning == 0 && len(tr.running) >= tr.want {
		tr.allRunning = since
	}
	if tr.allInjected == 0 && len(tr.injected) >= tr.want {
		tr.allInjected = since
	}
}

func setIf(m map[types.UID]bool, k types.UID, v bool) {
	if v {
		m[k] = true
	} else {
		delete(m, k)
	}
}

// waitFor waits until done reports true of the tracker, or fails the run.
func (b *bench) waitFor(tr *podTracker, what string, done func(*podTracker) bool) {
	b.t.Helper()
	err := wait.PollUntilContextTimeout(b.ctx, 50*time.Millisecond, 10*time.Minute, true, func(context.Context) (bool, error) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return done(tr), nil
	})
	if err != nil {
		b.t.Fatalf("%s: not done after 10 minutes: %v", what, err)
	}
}

func (b *bench) apiCalls() float64 {
	return b.mustScrape(b.mgr).sum("rest_client_requests_total", nil)
}

// warm makes the manager's metrics authentication cache hold the bench's
// token, so that the scrapes measured next cost the manager no request.
func (b *bench) warm() { b.mustScrape(b.mgr) }

// rounds runs a two-sided comparison repeat times, alternating which side
// goes first.
func (b *bench) rounds(deckhand, alternative func(round int)) {
	for i := range b.s.repeat {
		if i%2 == 0 {
			deckhand(i)
			alternative(i)
		} else {
			alternative(i)
			deckhand(i)
		}
	}
}

// podSetRow: a PodSet of 1,000 pods against a ReplicaSet with the same
// template.
func (b *bench) podSetRow() {
	n := b.s.n(1000)
	type side struct{ first, created, running, ever, alive, conflicts, calls, cpu []float64 }
	var ps, rs side
	// The CPU each side's controller spent: the manager's for the PodSet,
	// kube-controller-manager's (every controller it runs, its garbage
	// collector among them) for the ReplicaSet.
	kcm := b.processOf("kube-controller-manager", b.c.Name)
	controllerPID := map[string]int{"podset": b.mgr.p.Pid(), "replicaset": kcm}
	conflicts := func(resource string) float64 {
		return b.apiserverMetrics().sum("apiserver_request_total", func(l map[string]string) bool {
			return l["resource"] == resource && l["subresource"] == "status" && l["code"] == "409"
		})
	}
	run := func(s *side, kind string, create func(ns string)) {
		ns := b.namespace("bench-"+kind, nil)
		tr := b.trackPods(ns, n)
		defer close(tr.stop)
		resource := map[string]string{"podset": "podsets", "replicaset": "replicasets"}[kind]
		b.warm()
		before, conflictsBefore := b.apiCalls(), conflicts(resource)
		cpuBefore, err := cpuSeconds(controllerPID[kind])
		b.must(err)
		tr.begin()
		create(ns)
		b.waitFor(tr, kind+" pods Running", func(tr *podTracker) bool { return tr.allRunning > 0 })
		// Let the controller finish its status writes before counting.
		time.Sleep(3 * time.Second)
		tr.mu.Lock()
		s.first = append(s.first, tr.firstCreated.Seconds())
		s.created = append(s.created, tr.allCreated.Seconds())
		s.running = append(s.running, tr.allRunning.Seconds())
		s.ever = append(s.ever, float64(len(tr.seen)))
		s.alive = append(s.alive, float64(tr.maxAlive))
		tr.mu.Unlock()
		s.conflicts = append(s.conflicts, conflicts(resource)-conflictsBefore)
		s.calls = append(s.calls, (b.apiCalls()-before)/float64(n))
		cpuAfter, err := cpuSeconds(controllerPID[kind])
		b.must(err)
		s.cpu = append(s.cpu, cpuAfter-cpuBefore)
		b.dropNamespace(ns)
	}
	tmpl := benchTemplate()
	b.rounds(func(int) {
		run(&ps, "podset", func(ns string) {
			b.must(b.c.Client.Create(b.ctx, &appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bench"},
				Spec: appsv1beta1.PodSetSpec{Replicas: int32(n), Template: tmpl.DeepCopy()}}))
		})
	}, func(int) {
		run(&rs, "replicaset", func(ns string) {
			b.must(b.c.Client.Create(b.ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bench"},
				Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(n)), Selector: &metav1.LabelSelector{MatchLabels: benchLabels}, Template: *tmpl.DeepCopy()}}))
		})
	})
	row := fmt.Sprintf("PodSet vs ReplicaSet, %d pods", n)
	// The first pod's wait is the controller's start on a new object
	// (for the PodSet: the namespace's pod informer starting); the rest
	// is creation throughput.
	b.rep.add(&figure{Row: row, Metric: "first pod exists", Unit: "s"}, ps.first, rs.first)
	b.rep.add(&figure{Row: row, Metric: "all pods exist", Unit: "s"}, ps.created, rs.created).judgeRatio("≤ 0.8×", 0.8)
	b.rep.add(&figure{Row: row, Metric: "all pods Running", Unit: "s"}, ps.running, rs.running).judgeRatio("≤ 1.0×", 1.0)
	f := b.rep.add(&figure{Row: row, Metric: "pods ever created", Unit: "pods"}, ps.ever, rs.ever)
	f.judge("0 extra", slices.Max(ps.ever) <= float64(n))
	b.rep.add(&figure{Row: row, Metric: "most pods alive at once", Unit: "pods"}, ps.alive, rs.alive)
	f = b.rep.add(&figure{Row: row, Metric: "status-write conflicts (409)", Unit: "writes"}, ps.conflicts, rs.conflicts)
	f.judge("≈ 0 (≤ 10)", f.Deckhand <= 10)
	b.rep.add(&figure{Row: row, Metric: "manager API calls per created pod", Unit: "calls"}, ps.calls, nil)
	b.rep.add(&figure{Row: row, Metric: "controller CPU (manager / kube-controller-manager)", Unit: "s"}, ps.cpu, rs.cpu)
}

// judgeRatio judges a lower-is-better ratio against limit.
func (f *figure) judgeRatio(target string, limit float64) { f.judge(target, f.Ratio <= limit) }

// jobTracker follows the bench's Jobs: when each finished and when it was
// deleted.
type jobTracker struct {
	mu       sync.Mutex
	finished map[types.UID]time.Time
	deleted  map[types.UID]time.Time
	side     map[types.UID]string
	stop     chan struct{}
}

func (b *bench) trackJobs(selector string) *jobTracker {
	tr := &jobTracker{finished: map[types.UID]time.Time{}, deleted: map[types.UID]time.Time{}, side: map[types.UID]string{}, stop: make(chan struct{})}
	f := informers.NewSharedInformerFactoryWithOptions(b.c.Clientset, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	inf := f.Batch().V1().Jobs().Informer()
	seen := func(o any) {
		j := o.(*batchv1.Job)
		tr.mu.Lock()
		defer tr.mu.Unlock()
		tr.side[j.UID] = j.Labels["bench-side"]
		for _, c := range j.Status.Conditions {
			if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
				tr.finished[j.UID] = c.LastTransitionTime.Time
			}
		}
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    seen,
		UpdateFunc: func(_, o any) { seen(o) },
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if j, ok := o.(*batchv1.Job); ok {
				tr.mu.Lock()
				tr.deleted[j.UID] = time.Now()
				tr.mu.Unlock()
			}
		},
	})
	b.must(err)
	f.Start(tr.stop)
	f.WaitForCacheSync(tr.stop)
	return tr
}

// jobWatcherRow: Jobs under a JobWatcher and Jobs under the TTL-after-
// finished controller, with the same TTL, created together.
func (b *bench) jobWatcherRow() {
	n := b.s.n(500)
	const ttl = 5
	var jw, kube struct{ p50, p99, max []float64 }
	calls, jobCalls := b.perRound(), b.perRound()
	for round := range b.s.repeat {
		jwNS, ttlNS := b.namespace("bench-jobwatcher", nil), b.namespace("bench-ttl", nil)
		b.must(b.c.Client.Create(b.ctx, &deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: jwNS, Name: "bench"},
			Spec: deckhandbatchv1.JobWatcherSpec{JobPolicy: deckhandbatchv1.JobPolicy{TTLSecondsAfterSucceeded: ptr.To[int32](ttl), TTLSecondsAfterFailed: ptr.To[int32](ttl)}}}))
		selector := fmt.Sprintf("bench-round=%d-%d", b.seq.Load(), round)
		roundLabel := fmt.Sprintf("%d-%d", b.seq.Load(), round)
		tr := b.trackJobs(selector)
		b.warm()
		before := b.mustScrape(b.mgr)
		// Alternate which side each pair of creations starts with.
		b.must(parallel(2*n, 32, func(i int) error {
			onTTL := (i%2 == 0) == (round%2 == 0)
			job := &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("job-%d", i/2), Labels: map[string]string{"bench-round": roundLabel, "bench-side": "jobwatcher"}},
				Spec:       batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: benchPodSpec()}},
			}
			job.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
			job.Namespace = jwNS
			if onTTL {
				job.Namespace = ttlNS
				job.Labels["bench-side"] = "ttl"
				job.Spec.TTLSecondsAfterFinished = ptr.To[int32](ttl)
			}
			_, err := b.c.Clientset.BatchV1().Jobs(job.Namespace).Create(b.ctx, job, metav1.CreateOptions{})
			return err
		}))
		err := wait.PollUntilContextTimeout(b.ctx, 100*time.Millisecond, 15*time.Minute, true, func(context.Context) (bool, error) {
			tr.mu.Lock()
			defer tr.mu.Unlock()
			return len(tr.deleted) >= 2*n, nil
		})
		if err != nil {
			tr.mu.Lock()
			b.t.Fatalf("JobWatcher row: %d of %d Jobs deleted after 15 minutes", len(tr.deleted), 2*n)
		}
		after := b.mustScrape(b.mgr)
		close(tr.stop)
		lags := map[string][]float64{}
		for uid, at := range tr.deleted {
			fin, ok := tr.finished[uid]
			if !ok {
				b.t.Fatalf("Job %s deleted before it was seen finished", uid)
			}
			lags[tr.side[uid]] = append(lags[tr.side[uid]], at.Sub(fin.Add(ttl*time.Second)).Seconds())
		}
		for side, into := range map[string]*struct{ p50, p99, max []float64 }{"jobwatcher": &jw, "ttl": &kube} {
			into.p50 = append(into.p50, percentile(lags[side], 50))
			into.p99 = append(into.p99, percentile(lags[side], 99))
			into.max = append(into.max, slices.Max(lags[side]))
		}
		deleted := float64(len(lags["jobwatcher"]))
		calls = append(calls, (after.sum("rest_client_requests_total", nil)-before.sum("rest_client_requests_total", nil))/deleted)
		jobCalls = append(jobCalls, (after.sum("deckhand_jobwatcher_job_api_requests_total", label("resource", "jobs"))-before.sum("deckhand_jobwatcher_job_api_requests_total", label("resource", "jobs")))/deleted)
		b.dropNamespace(jwNS)
		b.dropNamespace(ttlNS)
	}
	row := fmt.Sprintf("JobWatcher vs TTL controller, %d + %d Jobs, TTL %ds", n, n, ttl)
	notDue := b.jobsNotYetDue(n)

	b.rep.add(&figure{Row: row, Metric: "deletion lag after TTL, p50", Unit: "s"}, jw.p50, kube.p50)
	b.rep.add(&figure{Row: row, Metric: "deletion lag after TTL, p99", Unit: "s"}, jw.p99, kube.p99).judgeRatio("≤ 1.0×", 1.0)
	b.rep.add(&figure{Row: row, Metric: "deletion lag after TTL, max", Unit: "s"}, jw.max, kube.max)
	// Every call the manager made, the watcher's own status writes and
	// Events (each at most one a second, however many Jobs) included: the
	// target is on the calls each Job costs, the figure below.
	b.rep.add(&figure{Row: row, Metric: "all manager API calls per deleted Job, the watcher's status and Event writes included (rest_client_requests_total)", Unit: "calls"}, calls, nil)
	f := b.rep.add(&figure{Row: row, Metric: "single-Job API calls per deleted Job (deckhand_jobwatcher_job_api_requests_total)", Unit: "calls"}, jobCalls, nil)
	f.judge("≤ 2", f.Deckhand <= 2)
	f = b.rep.add(&figure{Row: row, Metric: fmt.Sprintf("single-Job API calls for %d finished Jobs not yet due (TTL 1h)", n), Unit: "calls"}, []float64{notDue}, nil)
	f.judge("0", f.Deckhand == 0)
}

// jobsNotYetDue counts the single-Job requests (reads and deletes) the
// manager makes for n Jobs that finish under a watcher whose TTL is an hour
// away: from their creation until a few seconds after the last finished.
func (b *bench) jobsNotYetDue(n int) float64 {
	ns := b.namespace("bench-not-due", nil)
	b.must(b.c.Client.Create(b.ctx, &deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bench"},
		Spec: deckhandbatchv1.JobWatcherSpec{JobPolicy: deckhandbatchv1.JobPolicy{TTLSecondsAfterSucceeded: ptr.To[int32](3600), TTLSecondsAfterFailed: ptr.To[int32](3600)}}}))
	roundLabel := fmt.Sprintf("not-due-%d", b.seq.Load())
	tr := b.trackJobs("bench-round=" + roundLabel)
	defer close(tr.stop)
	b.warm()
	before := b.mustScrape(b.mgr)
	b.must(parallel(n, 32, func(i int) error {
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("job-%d", i), Labels: map[string]string{"bench-round": roundLabel}},
			Spec:       batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: benchPodSpec()}},
		}
		job.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
		_, err := b.c.Clientset.BatchV1().Jobs(ns).Create(b.ctx, job, metav1.CreateOptions{})
		return err
	}))
	err := wait.PollUntilContextTimeout(b.ctx, 100*time.Millisecond, 15*time.Minute, true, func(context.Context) (bool, error) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return len(tr.finished) >= n, nil
	})
	if err != nil {
		b.t.Fatalf("JobWatcher row: %d of %d Jobs not yet due finished after 15 minutes", len(tr.finished), n)
	}
	time.Sleep(5 * time.Second)
	after := b.mustScrape(b.mgr)
	b.dropNamespace(ns)
	return after.sum("deckhand_jobwatcher_job_api_requests_total", label("resource", "jobs")) - before.sum("deckhand_jobwatcher_job_api_requests_total", label("resource", "jobs"))
}

// modelBoxRow: ModelBoxes to Available against applying the same
// Deployments and Services directly.
func (b *bench) modelBoxRow() {
	deploy, svc := b.modelBoxChildren()
	b.modelBoxAt(b.s.n(300), 0, deploy, svc)
}

// benchModelBox is the ModelBox both ModelBox rows make: one replica, one
// port.
func benchModelBox(ns, name string) *modelv1.ModelBox {
	return &modelv1.ModelBox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: modelv1.ModelBoxSpec{Image: benchImage, Replicas: ptr.To[int32](1),
			Ports: []modelv1.ServicePort{{Port: 80, TargetPort: ptr.To(intstr.FromInt32(8080))}}}}
}

// modelBoxChildren are the Deployment and Service a ModelBox makes, to
// apply directly.
func (b *bench) modelBoxChildren() (*appsv1.Deployment, *corev1.Service) {
	warmNS := b.namespace("bench-modelbox-template", nil)
	b.must(b.c.Client.Create(b.ctx, benchModelBox(warmNS, "template")))
	deploy, svc := &appsv1.Deployment{}, &corev1.Service{}
	b.must(wait.PollUntilContextTimeout(b.ctx, 200*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		return b.c.Client.Get(ctx, client.ObjectKey{Namespace: warmNS, Name: "template"}, deploy) == nil &&
			b.c.Client.Get(ctx, client.ObjectKey{Namespace: warmNS, Name: "template"}, svc) == nil, nil
	}))
	b.dropNamespace(warmNS)
	return deploy, svc
}

// modelBoxAt compares n ModelBoxes with the same Deployments and Services
// created directly; scaleN is the figures' N (0 outside the scale family).
func (b *bench) modelBoxAt(n, scaleN int, deploy *appsv1.Deployment, svc *corev1.Service) {
	box := benchModelBox
	const boxLabel = "model.deckhand.dev/modelbox" // renamed, so that Deckhand's cache does not see the direct side
	relabel := func(m map[string]string, name string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			if k == boxLabel {
				k = "bench.deckhand.dev/box"
			}
			if v == "template" {
				v = name
			}
			out[k] = v
		}
		return out
	}
	direct := func(ns string, i int) error {
		name := fmt.Sprintf("box-%d", i)
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: relabel(deploy.Labels, name)}, Spec: *deploy.Spec.DeepCopy()}
		d.Spec.Selector = &metav1.LabelSelector{MatchLabels: relabel(deploy.Spec.Selector.MatchLabels, name)}
		d.Spec.Template.Labels = relabel(deploy.Spec.Template.Labels, name)
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: relabel(svc.Labels, name)},
			Spec: corev1.ServiceSpec{Type: svc.Spec.Type, Ports: svc.Spec.Ports, Selector: relabel(svc.Spec.Selector, name)}}
		if _, err := b.c.Clientset.AppsV1().Deployments(ns).Create(b.ctx, d, metav1.CreateOptions{FieldManager: "bench"}); err != nil {
			return err
		}
		_, err := b.c.Clientset.CoreV1().Services(ns).Create(b.ctx, s, metav1.CreateOptions{FieldManager: "bench"})
		return err
	}
	var mb, alt, calls []float64
	// The CPU the apiserver, the manager and kube-controller-manager spent
	// on each side: on two cores, the wall time is mostly their sum.
	pids := []int{b.processOf("kube-apiserver", b.c.Name), b.mgr.p.Pid(), b.processOf("kube-controller-manager", b.c.Name)}
	var cpuOf [3][2][]float64 // by process, then side
	cpu := func() (out [3]float64) {
		for i, pid := range pids {
			s, err := cpuSeconds(pid)
			b.must(err)
			out[i] = s
		}
		return out
	}
	// Each side waits as kubectl wait does, on a watch: polling with Lists
	// cost the apiserver in proportion to the time a side took, and a List
	// of 300 ModelBoxes (a custom resource, encoded as JSON from unstructured
	// objects) about four times one of 300 Deployments.
	timed := func(side int, create func(ns string, i int) error, list client.ObjectList, available func(client.Object) bool) (float64, string) {
		ns := b.namespace("bench-modelbox", nil)
		cpuBefore := cpu()
		requestsBefore := b.apiserverMetrics()
		done := b.watchUntil(ns, list, n, available)
		start := time.Now()
		b.must(parallel(n, 32, func(i int) error { return create(ns, i) }))
		b.must(<-done)
		secs := time.Since(start).Seconds()
		for i, after := range cpu() {
			cpuOf[i][side] = append(cpuOf[i][side], after-cpuBefore[i])
		}
		fmt.Printf("bench: modelbox %s side, apiserver requests per object: %s\n", []string{"ModelBox", "direct"}[side],
			requestsPerObject(requestsBefore, b.apiserverMetrics(), n))
		return secs, ns
	}
	b.rounds(func(int) {
		b.warm()
		before := b.apiCalls()
		secs, ns := timed(0, func(ns string, i int) error { return b.c.Client.Create(b.ctx, box(ns, fmt.Sprintf("box-%d", i))) },
			&modelv1.ModelBoxList{}, func(o client.Object) bool {
				return meta.IsStatusConditionTrue(o.(*modelv1.ModelBox).Status.Conditions, modelv1.ConditionAvailable)
			})
		mb = append(mb, secs)
		calls = append(calls, (b.apiCalls()-before)/float64(n))
		b.dropNamespace(ns)
	}, func(int) {
		secs, ns := timed(1, direct, &appsv1.DeploymentList{}, func(o client.Object) bool {
			for _, c := range o.(*appsv1.Deployment).Status.Conditions {
				if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
					return true
				}
			}
			return false
		})
		alt = append(alt, secs)
		b.dropNamespace(ns)
	})
	row := fmt.Sprintf("ModelBox vs Deployment + Service applied directly, %d", n)
	b.rep.add(&figure{Row: row, Metric: "all Available", Unit: "s", N: scaleN}, mb, alt).judgeRatio("≤ 1.1×", 1.1)
	b.rep.add(&figure{Row: row, Metric: "manager API calls per ModelBox", Unit: "calls", N: scaleN}, calls, nil)
	for i, name := range []string{"kube-apiserver", "manager", "kube-controller-manager"} {
		b.rep.add(&figure{Row: row, Metric: name + " CPU", Unit: "s", N: scaleN}, cpuOf[i][0], cpuOf[i][1])
	}
}

// watchUntil watches the objects of list's kind in ns, from now on, until n
// of them are ok; the channel then yields nil. It yields an error when ten
// minutes pass. A watch the apiserver ends (it closes one whose client
// falls behind, as a busy machine makes the bench: seen with 200 ModelBoxes)
// is resumed from a fresh List, so nothing is missed or counted twice.
func (b *bench) watchUntil(ns string, list client.ObjectList, n int, ok func(client.Object) bool) <-chan error {
	wc, err := client.NewWithWatch(b.c.Config, client.Options{Scheme: b.c.Client.Scheme()})
	b.must(err)
	w, err := wc.Watch(b.ctx, list, client.InNamespace(ns))
	b.must(err)
	done := make(chan error, 1)
	go func() {
		defer func() { w.Stop() }()
		timeout := time.After(10 * time.Minute)
		good := map[types.UID]bool{}
		for {
			select {
			case e, open := <-w.ResultChan():
				if !open {
					resumed, err := b.resumeWatch(wc, ns, list, good, ok)
					if err != nil {
						done <- fmt.Errorf("resuming the watch of %T in %s at %d of %d ready: %w", list, ns, len(good), n, err)
						return
					}
					w = resumed
					fmt.Printf("bench: the watch of %T in %s ended at %d of %d ready; resumed from a List\n", list, ns, len(good), n)
				} else if obj, isObj := e.Object.(client.Object); isObj && e.Type != watch.Error {
					setIf(good, obj.GetUID(), e.Type != watch.Deleted && ok(obj))
				}
				if len(good) >= n {
					done <- nil
					return
				}
			case <-timeout:
				done <- fmt.Errorf("%d of %d %T in %s ready after 10 minutes", len(good), n, list, ns)
				return
			}
		}
	}()
	return done
}

// resumeWatch lists list's kind in ns, counts afresh in good what is ok,
// and watches on from the List.
func (b *bench) resumeWatch(wc client.WithWatch, ns string, list client.ObjectList, good map[types.UID]bool, ok func(client.Object) bool) (watch.Interface, error) {
	l, isList := list.DeepCopyObject().(client.ObjectList)
	if !isList {
		return nil, fmt.Errorf("%T is not a list", list)
	}
	if err := wc.List(b.ctx, l, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	clear(good)
	if err := meta.EachListItem(l, func(o runtime.Object) error {
		if obj, isObj := o.(client.Object); isObj {
			setIf(good, obj.GetUID(), ok(obj))
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return wc.Watch(b.ctx, list, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: l.GetResourceVersion()}})
}

// requestsPerObject tells the requests the apiserver served between two
// scrapes of its metrics, by verb, resource and subresource, per object of
// n, with the time they took in all, the longest first: "PATCH
// modelboxes/status 1.52 (1.21 s), ...". On a busy machine the time is
// mostly waiting for CPU, so it only ranks the kinds of request.
func requestsPerObject(before, after metrics, n int) string {
	type kind struct{ verb, resource string }
	count, took := map[kind]float64{}, map[kind]float64{}
	for sign, m := range map[float64]metrics{-1: before, 1: after} {
		for _, s := range m {
			if s.labels["verb"] == "WATCH" || s.labels["resource"] == "" {
				continue
			}
			r := s.labels["resource"]
			if sub := s.labels["subresource"]; sub != "" {
				r += "/" + sub
			}
			switch s.name {
			case "apiserver_request_total":
				count[kind{s.labels["verb"], r}] += sign * s.value
			case "apiserver_request_duration_seconds_sum":
				took[kind{s.labels["verb"], r}] += sign * s.value
			}
		}
	}
	kinds := slices.Collect(maps.Keys(count))
	slices.SortFunc(kinds, func(a, b kind) int { return cmp.Compare(took[b], took[a]) })
	var parts []string
	for _, k := range kinds {
		if per := count[k] / float64(n); per >= 0.05 {
			parts = append(parts, fmt.Sprintf("%s %s %.2f (%.2f s)", k.verb, k.resource, per, took[k]))
		}
	}
	return strings.Join(parts, ", ")
}

// podBuggerRow: a PodBugger injecting into 1,000 matching pods against
// kubectl-debug-style patches from 64 parallel clients (the ceiling).
func (b *bench) podBuggerRow() {
	n := min(b.s.n(1000), 1000) // maxPods is at most 1,000
	var pb, alt, calls []float64
	run := func(into *[]float64, inject func(ns string)) {
		ns := b.namespace("bench-podbugger", map[string]string{debugv1beta1.NamespaceEnabledLabel: "true"})
		tr := b.trackPods(ns, n)
		defer close(tr.stop)
		b.createPods(ns, "target", n, benchLabels, false)
		b.waitRunning(ns, n)
		tr.begin()
		inject(ns)
		b.waitFor(tr, "injections", func(tr *podTracker) bool { return tr.allInjected > 0 })
		tr.mu.Lock()
		*into = append(*into, float64(n)/tr.allInjected.Seconds())
		tr.mu.Unlock()
		b.dropNamespace(ns)
	}
	b.rounds(func(int) {
		b.warm()
		before := b.apiCalls()
		run(&pb, func(ns string) {
			b.must(b.c.Client.Create(b.ctx, &debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "debugger"},
				Spec: debugv1beta1.PodBuggerSpec{Selector: metav1.LabelSelector{MatchLabels: benchLabels},
					Image: "docker.io/library/busybox:1.37", MaxPods: int32(n)}}))
		})
		calls = append(calls, (b.apiCalls()-before)/float64(n))
	}, func(int) {
		run(&alt, func(ns string) {
			patch := []byte(`{"spec":{"ephemeralContainers":[{"name":"debugger","image":"docker.io/library/busybox:1.37","targetContainerName":"app","stdin":true,"tty":true}]}}`)
			b.must(parallel(n, 64, func(i int) error {
				_, err := b.c.Clientset.CoreV1().Pods(ns).Patch(b.ctx, fmt.Sprintf("target-%d", i), types.StrategicMergePatchType, patch,
					metav1.PatchOptions{}, "ephemeralcontainers")
				return err
			}))
		})
	})
	row := fmt.Sprintf("PodBugger vs parallel ephemeral-container patches (64 clients), %d pods", n)
	f := b.rep.add(&figure{Row: row, Metric: "injection throughput", Unit: "pods/s"}, pb, alt)
	f.judge("≥ 0.8× the ceiling", f.Ratio >= 0.8)
	b.rep.add(&figure{Row: row, Metric: "manager API calls per injection", Unit: "calls"}, calls, nil)
}

// ceilingRow: what the apiserver accepts from a client that does nothing
// else: pod creations from 64 parallel clients.
func (b *bench) ceilingRow() {
	n := b.s.n(1000)
	created, running := b.perRound(), b.perRound()
	for range b.s.repeat {
		ns := b.namespace("bench-ceiling", nil)
		tr := b.trackPods(ns, n)
		start := time.Now()
		tr.begin()
		b.createPods(ns, "raw", n, benchLabels, true)
		created = append(created, time.Since(start).Seconds())
		b.waitFor(tr, "ceiling pods Running", func(tr *podTracker) bool { return tr.allRunning > 0 })
		tr.mu.Lock()
		running = append(running, tr.allRunning.Seconds())
		tr.mu.Unlock()
		close(tr.stop)
		b.dropNamespace(ns)
	}
	row := fmt.Sprintf("raw ceiling: %d pod creates from 64 parallel clients", n)
	b.rep.add(&figure{Row: row, Metric: "all created", Unit: "s"}, created, nil)
	b.rep.add(&figure{Row: row, Metric: "all Running", Unit: "s"}, running, nil)
}

// idleRow: API writes per minute once every kind has an object and all of
// them converged. The manager runs without leader election here, so every
// write counts (there are no lease renewals to discount).
func (b *bench) idleRow() {
	ns := b.namespace("bench-idle", map[string]string{debugv1beta1.NamespaceEnabledLabel: "true"})
	b.createPods(ns, "target", 1, map[string]string{"app": "debug-me"}, false)
	b.must(b.c.Client.Create(b.ctx, &appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "idle"},
		Spec: appsv1beta1.PodSetSpec{Replicas: 5, Template: ptr.To(benchTemplate())}}))
	b.must(b.c.Client.Create(b.ctx, &modelv1.ModelBox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "idle"},
		Spec: modelv1.ModelBoxSpec{Image: benchImage, Replicas: ptr.To[int32](2), Ports: []modelv1.ServicePort{{Port: 80, TargetPort: ptr.To(intstr.FromInt32(8080))}}}}))
	b.must(b.c.Client.Create(b.ctx, &deckhandbatchv1.JobWatcher{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "idle"},
		Spec: deckhandbatchv1.JobWatcherSpec{JobPolicy: deckhandbatchv1.JobPolicy{TTLSecondsAfterSucceeded: ptr.To[int32](3600)}}}))
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kept"}, Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: benchPodSpec()}}}
	job.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	b.must(b.c.Client.Create(b.ctx, job))
	b.must(b.c.Client.Create(b.ctx, &debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "idle"},
		Spec: debugv1beta1.PodBuggerSpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "debug-me"}}, Image: "docker.io/library/busybox:1.37"}}))
	err := wait.PollUntilContextTimeout(b.ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		set, box, pbug, j := &appsv1beta1.PodSet{}, &modelv1.ModelBox{}, &debugv1beta1.PodBugger{}, &batchv1.Job{}
		key := client.ObjectKey{Namespace: ns, Name: "idle"}
		if b.c.Client.Get(ctx, key, set) != nil || b.c.Client.Get(ctx, key, box) != nil || b.c.Client.Get(ctx, key, pbug) != nil ||
			b.c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kept"}, j) != nil {
			return false, nil
		}
		return set.Status.ReadyReplicas == 5 && meta.IsStatusConditionTrue(box.Status.Conditions, modelv1.ConditionAvailable) &&
			pbug.Status.Installed == 1 && j.Status.CompletionTime != nil, nil
	})
	if err != nil {
		b.t.Fatalf("idle row: objects did not converge in 5 minutes: %v", err)
	}
	time.Sleep(15 * time.Second) // the last status writes and events
	// The bench's own scrapes cost the manager a TokenReview and a
	// SubjectAccessReview now and then (POSTs, cached for one and five
	// minutes from when they were made): those are not the manager's idle
	// work. The apiserver counts them, and the manager is the only client
	// that creates reviews here, so they are taken out.
	reviews := func() float64 {
		return b.apiserverMetrics().sum("apiserver_request_total", func(l map[string]string) bool {
			return l["verb"] == "POST" && (l["resource"] == "tokenreviews" || l["resource"] == "subjectaccessreviews")
		})
	}
	b.warm()
	before, reviewsBefore := b.mustScrape(b.mgr), reviews()
	time.Sleep(b.s.idle)
	after, reviewsAfter := b.mustScrape(b.mgr), reviews()
	byMethod := map[string]float64{}
	var writes float64
	for _, m := range writeMethods {
		d := after.sum("rest_client_requests_total", label("method", m)) - before.sum("rest_client_requests_total", label("method", m))
		writes += d
		byMethod[m] += d
	}
	byMethod["POST"] -= reviewsAfter - reviewsBefore
	fmt.Printf("bench: idle: %g token and access reviews for the bench's scrapes taken out\n", reviewsAfter-reviewsBefore)
	writes -= reviewsAfter - reviewsBefore
	minutes := b.s.idle.Minutes()
	if writes > 0 {
		fmt.Printf("bench: idle writes by method: %v\n", byMethod)
	}
	f := b.rep.add(&figure{Row: "idle cost, every kind converged", Metric: fmt.Sprintf("manager API writes per minute (over %s)", b.s.idle), Unit: "writes/min", Gate: true},
		[]float64{writes / minutes}, nil)
	f.judge("0", f.Deckhand == 0)
	b.dropNamespace(ns)
}

// memoryRow: the manager's resident memory and heap with nothing, 10,000
// unrelated pods, and 10,000 unrelated Jobs more, each measured on a manager
// started fresh against that cluster (as after an install or a restart).
func (b *bench) memoryRow() {
	pods, jobs := b.s.n(10000), b.s.n(10000)
	const settle = 20 * time.Second
	// BENCH_COMPARE_BIN names another manager build (an older commit, say)
	// measured in the same rounds, alternating, as the alternative column.
	compare := os.Getenv("BENCH_COMPARE_BIN")
	sample := func(bin string, rss, anon, heap *[]float64) {
		b.t.Setenv("DECKHAND_BIN", bin)
		m := b.startManager()
		time.Sleep(settle)
		r, err := rssMiB(m.p.Pid())
		b.must(err)
		a, err := procStatusMiB(m.p.Pid(), "RssAnon")
		b.must(err)
		*rss, *anon = append(*rss, r), append(*anon, a)
		*heap = append(*heap, b.mustScrape(m).sum("go_memstats_heap_inuse_bytes", nil)/(1<<20))
		m.p.Stop()
	}
	// judged: the figure has the 64 MiB target; gate: a miss fails the run.
	measure := func(state string, judged, gate bool) {
		var rss, anon, heap, altRSS, altAnon, altHeap []float64
		for i := range b.s.repeat {
			if compare != "" && i%2 == 1 {
				sample(compare, &altRSS, &altAnon, &altHeap)
			}
			sample(b.bin, &rss, &anon, &heap)
			if compare != "" && i%2 == 0 {
				sample(compare, &altRSS, &altAnon, &altHeap)
			}
		}
		row := "manager memory, " + state
		if compare != "" {
			row += " (alternative: " + compare + ")"
		}
		f := b.rep.add(&figure{Row: row, Metric: "RSS (VmRSS)", Unit: "MiB", Gate: gate}, rss, altRSS)
		if judged {
			f.judge("≤ 64 MiB", f.Deckhand <= 64)
		}
		// The rest of VmRSS is the binary's own pages (RssFile).
		b.rep.add(&figure{Row: row, Metric: "anonymous resident memory (RssAnon)", Unit: "MiB"}, anon, altAnon)
		b.rep.add(&figure{Row: row, Metric: "heap in use", Unit: "MiB"}, heap, altHeap)
	}
	measure("no unrelated objects", false, false)

	podNS := b.namespace("bench-unrelated-pods", nil)
	b.createPods(podNS, "unrelated", pods, map[string]string{"app": "unrelated", "tier": "web"}, false)
	b.waitRunning(podNS, pods)
	measure(fmt.Sprintf("%d unrelated pods", pods), false, false)

	jobNS := b.namespace("bench-unrelated-jobs", nil)
	b.must(parallel(jobs, 64, func(i int) error {
		// Suspended: the Job controller makes no pods for them.
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: jobNS, Name: fmt.Sprintf("unrelated-%d", i), Labels: map[string]string{"app": "unrelated"}},
			Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: benchPodSpec()}}}
		job.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
		_, err := b.c.Clientset.BatchV1().Jobs(jobNS).Create(b.ctx, job, metav1.CreateOptions{})
		return err
	}))
	measure(fmt.Sprintf("%d unrelated pods + %d unrelated Jobs", pods, jobs), true, true)

	// More namespaces in play than the scoped cache holds one by one: its
	// pods and Jobs are then held cluster-wide.
	watched := scopedcache.ClusterWideAbove + 1
	b.watchedNamespaces(watched)
	// Judged, not a gate yet: the quiet run of 2026-11-26 measured 88 MiB
	// (heap in use 43.9 MiB: the cluster-wide informer's 20,000 stubs and
	// the peak of decoding its list), an open target of issue 26, not a
	// regression; docs/dev-log/performance.md says what is known of it.
	measure(fmt.Sprintf("%d unrelated pods + %d unrelated Jobs, %d namespaces with a JobWatcher and a PodBugger", pods, jobs, watched), true, false)
}
