//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/test/cluster"
)

// incidentWatch follows a namespace's pods and PodIncidents on the bench's
// clock: when the apiserver first showed each failed container instance
// (by its container ID) in a pod's status, and when it first showed a record
// holding that instance as its last failure.
type incidentWatch struct {
	mu sync.Mutex
	// reported: instance → when its termination first showed in the pod.
	reported map[string]time.Time
	// recorded: instance → the record that first held it, when it showed.
	recorded map[string]recordSeen
	stop     func()
}

type recordSeen struct {
	at       time.Time
	finished time.Time // the kubelet's finishedAt (whole seconds)
	started  time.Time
	logTail  string
	logError string // why the instance's slot holds no log
	pod      string
	class    debugv1beta1.IncidentClass
}

func (b *bench) watchIncidents(ns string) *incidentWatch {
	iw := &incidentWatch{reported: map[string]time.Time{}, recorded: map[string]recordSeen{}}
	wc, err := client.NewWithWatch(b.c.Config, client.Options{Scheme: b.c.Client.Scheme()})
	b.must(err)
	ctx, cancel := context.WithCancel(b.ctx)
	iw.stop = cancel
	pods, err := wc.Watch(ctx, &corev1.PodList{}, client.InNamespace(ns))
	b.must(err)
	recs, err := wc.Watch(ctx, &debugv1beta1.PodIncidentList{}, client.InNamespace(ns))
	b.must(err)
	follow := func(w watch.Interface, seen func(obj client.Object, at time.Time)) {
		defer w.Stop()
		for e := range w.ResultChan() {
			if obj, ok := e.Object.(client.Object); ok && e.Type != watch.Error && e.Type != watch.Deleted {
				seen(obj, time.Now())
			}
		}
	}
	go follow(pods, func(obj client.Object, at time.Time) {
		pod := obj.(*corev1.Pod)
		iw.mu.Lock()
		defer iw.mu.Unlock()
		for _, cs := range pod.Status.ContainerStatuses {
			for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
				if t != nil && t.ContainerID != "" && t.ExitCode != 0 {
					if _, known := iw.reported[t.ContainerID]; !known {
						iw.reported[t.ContainerID] = at
					}
				}
			}
		}
	})
	go follow(recs, func(obj client.Object, at time.Time) {
		r := obj.(*debugv1beta1.PodIncident)
		iw.mu.Lock()
		defer iw.mu.Unlock()
		// Each failed instance has its slot: written at once, its log a
		// moment later, perhaps after the next failure made the record's
		// last. The latest update of the slot holds its log.
		for _, in := range r.Spec.Instances {
			if in.ContainerID == "" {
				continue
			}
			seen, known := iw.recorded[in.ContainerID]
			if !known {
				seen = recordSeen{at: at, finished: in.FinishedAt.Time, started: in.StartedAt.Time, pod: r.Spec.Pod.Name, class: in.Class}
			}
			seen.logTail, seen.logError = in.LogTail, in.LogError
			iw.recorded[in.ContainerID] = seen
		}
	})
	return iw
}

// exitLine is what each crashing instance prints last: the second it exits.
var exitLine = regexp.MustCompile(`exit (\d+)\n`)

// injected is a kind of failure the incidents row injects on the real
// node: the pods' name prefix, their script, and the class their records
// must say. A rollout's pods are deleted while they run: a termination that
// is no failure, recorded as nothing.
type injected struct {
	prefix string
	pods   int
	script string
	limit  string
	class  debugv1beta1.IncidentClass
}

// injectedFailures are the incidents row's pods, about 100 failures a
// round: three times as many loaded the project's 2-core machine to 9.5 and
// the kubelet's own report of a failure to 5 s (p99) ($$$$: the kubelet turns
// $$ into $ in a command). The child OOM is the node's cgroup v1 killing
// the one process that passed the limit while the shell goes on.
var injectedFailures = []injected{
	{"crasher", 6, `echo "start $(date +%s)"; sleep 2; echo "exit $(date +%s)"; exit 1`, "", debugv1beta1.ClassExitCode},
	{"code", 2, `echo "start $(date +%s)"; sleep 2; echo "exit $(date +%s)"; exit 42`, "", debugv1beta1.ClassExitCode},
	{"oom", 2, `echo "start $(date +%s)"; sleep 1; echo "exit $(date +%s)"; dd if=/dev/zero of=/dev/null bs=64M count=1`, "24Mi", debugv1beta1.ClassOOMKilled},
	{"segv", 2, `echo "start $(date +%s)"; sleep 1; echo "exit $(date +%s)"; sh -c 'kill -SEGV $$$$'; exit $?`, "", debugv1beta1.ClassSignal},
	{"childoom", 2, `echo "start $(date +%s)"; sleep 1; dd if=/dev/zero of=/dev/null bs=64M count=1; echo "exit $(date +%s)"; exit 3`, "24Mi", debugv1beta1.ClassOOMKilledChild},
	{"rollout", 4, `echo serving; sleep 3600`, "", ""},
}

// classOf is the class a record of pod must say: its kind's, by the pod's
// name; "" for a pod that must have none.
func classOf(pod string) debugv1beta1.IncidentClass {
	for _, k := range injectedFailures {
		if strings.HasPrefix(pod, k.prefix+"-") {
			return k.class
		}
	}
	return ""
}

// incidentsRow: on the real node, busyboxes that fail every few seconds in
// every way injectedFailures lists, and a rollout's pods deleted while they
// run, under a PodBugger that only records. For every failed instance: the
// kubelet's finishedAt to its record showing (the figure;
// finishedAt has whole seconds, so each value is up to a second long), the
// failure showing in the pod's status to its record showing (Deckhand's own
// share, on one clock), whether the record's log is the failed instance's,
// and whether its class is the one injected; and the rollout's records.
func (b *bench) incidentsRow() {
	window := 90 * time.Second
	p50, p99, own99, kubelet99, wrong, logless, missed := b.perRound(), b.perRound(), b.perRound(), b.perRound(), b.perRound(), b.perRound(), b.perRound()
	captured, classed, rollouts := b.perRound(), b.perRound(), b.perRound()
	var samples, pods int
	for range b.s.repeat {
		ns := b.c.RealNodeNamespace(b.t, nil)
		iw := b.watchIncidents(ns)
		b.must(b.c.Client.Create(b.ctx, &debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "catch"},
			Spec: debugv1beta1.PodBuggerSpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "flaky"}},
				Image:     cluster.BusyboxImage,
				Triggers:  []debugv1beta1.Trigger{debugv1beta1.TriggerError, debugv1beta1.TriggerOOMKilled, debugv1beta1.TriggerCrashLoopBackOff},
				Incidents: &debugv1beta1.IncidentPolicy{MaxRecords: 200}}}))
		pods = 0
		for _, k := range injectedFailures {
			for i := range k.pods {
				pod := realNodePod(ns, fmt.Sprintf("%s-%d", k.prefix, i), k.script)
				if k.limit != "" {
					pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(k.limit)}
				}
				b.must(b.c.Client.Create(b.ctx, pod))
				pods++
			}
		}
		// Halfway, the rollout: its pods deleted while they run (their
		// grace period is 0: SIGKILL, exit 137, no failure).
		time.Sleep(window / 2)
		for i := range injectedFailures[len(injectedFailures)-1].pods {
			b.must(client.IgnoreNotFound(b.c.Client.Delete(b.ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("rollout-%d", i)}})))
		}
		time.Sleep(window / 2)
		// The last failures' records: a few seconds more.
		time.Sleep(5 * time.Second)
		iw.stop()
		iw.mu.Lock()
		var lat, own, kubelet []float64
		var bad, noLog, lost, misclassed float64
		for id, reported := range iw.reported {
			if time.Since(reported) < 10*time.Second {
				continue // failed at the very end: its record may not be written yet
			}
			r, ok := iw.recorded[id]
			if !ok {
				lost++
				continue
			}
			lat = append(lat, r.at.Sub(r.finished).Seconds())
			own = append(own, r.at.Sub(reported).Seconds())
			kubelet = append(kubelet, reported.Sub(r.finished).Seconds())
			switch {
			case logOfInstance(r):
			case r.logTail == "":
				noLog++
				fmt.Printf("bench: incidents: %s's instance %s (started %s, finished %s) has no log: %s\n",
					r.pod, id, r.started.UTC().Format(time.RFC3339), r.finished.UTC().Format(time.RFC3339), r.logError)
			default:
				bad++
				fmt.Printf("bench: incidents: %s's instance %s (started %s, finished %s) has another instance's log: %q\n",
					r.pod, id, r.started.UTC().Format(time.RFC3339), r.finished.UTC().Format(time.RFC3339), r.logTail)
			}
			if want := classOf(r.pod); want == "" || r.class != want {
				misclassed++
				fmt.Printf("bench: incidents: %s's instance %s classed %q, injected %q\n", r.pod, id, r.class, want)
			}
		}
		iw.mu.Unlock()
		recs := &debugv1beta1.PodIncidentList{}
		b.must(b.c.Client.List(b.ctx, recs, client.InNamespace(ns)))
		var rolledOut float64
		for _, r := range recs.Items {
			if strings.HasPrefix(r.Spec.Pod.Name, "rollout-") {
				rolledOut++
			}
		}
		samples += len(lat)
		p50, p99 = append(p50, percentile(lat, 50)), append(p99, percentile(lat, 99))
		own99, kubelet99 = append(own99, percentile(own, 99)), append(kubelet99, percentile(kubelet, 99))
		wrong, logless, missed = append(wrong, bad), append(logless, noLog), append(missed, lost)
		captured = append(captured, 100*float64(len(lat))/max(1, float64(len(lat))+lost))
		classed = append(classed, 100*(float64(len(lat))-misclassed)/max(1, float64(len(lat))))
		rollouts = append(rollouts, rolledOut)
		fmt.Printf("bench: incidents round: %d failures recorded, %g not recorded, %g with another instance's log, %g without a log, %g classed otherwise than injected, %g records of the rollout; finishedAt→record p50 %.2f s p99 %.2f s; status→record p99 %.3f s\n",
			len(lat), lost, bad, noLog, misclassed, rolledOut, percentile(lat, 50), percentile(lat, 99), percentile(own, 99))
		b.dropNamespace(ns)
	}
	row := fmt.Sprintf("PodIncident on the real node: %d pods failing by exit codes, signals, OOM (own and child), a rollout, %s a round (%d failures in all)",
		pods, window, samples)
	b.rep.add(&figure{Row: row, Metric: "finishedAt → record, p50", Unit: "s"}, p50, nil)
	f := b.rep.add(&figure{Row: row, Metric: "finishedAt → record, p99 (finishedAt has whole seconds)", Unit: "s"}, p99, nil)
	f.judge("≤ 1 s", f.Deckhand <= 1)
	b.rep.add(&figure{Row: row, Metric: "failure in pod status → record, p99 (one clock)", Unit: "s"}, own99, nil)
	b.rep.add(&figure{Row: row, Metric: "finishedAt → failure in pod status, p99 (the kubelet's share)", Unit: "s"}, kubelet99, nil)
	f = b.rep.add(&figure{Row: row, Metric: "records with another instance's log", Unit: "records"}, wrong, nil)
	f.judge("0", f.Deckhand == 0)
	b.rep.add(&figure{Row: row, Metric: "instances whose slot says why it holds no log", Unit: "instances"}, logless, nil)
	f = b.rep.add(&figure{Row: row, Metric: "failures not recorded", Unit: "failures"}, missed, nil)
	f.judge("0", f.Deckhand == 0)
	f = b.rep.add(&figure{Row: row, Metric: "failures captured", Unit: "%"}, captured, nil)
	f.judge("≥ 99.9 %", f.Deckhand >= 99.9)
	f = b.rep.add(&figure{Row: row, Metric: "records classed as injected", Unit: "%"}, classed, nil)
	f.judge("100 %", f.Deckhand == 100)
	f = b.rep.add(&figure{Row: row, Metric: "records of the rollout's deletions", Unit: "records"}, rollouts, nil)
	f.judge("0", f.Deckhand == 0)
}

// logOfInstance: the record's log ends with the exit line its failed
// instance printed, within a second of the kubelet's finishedAt. An OOM-
// killed instance prints its exit line before it is killed, a second or so
// earlier.
func logOfInstance(r recordSeen) bool {
	m := exitLine.FindAllStringSubmatch(r.logTail, -1)
	if len(m) == 0 {
		return false
	}
	exited, err := strconv.ParseInt(m[len(m)-1][1], 10, 64)
	if err != nil {
		return false
	}
	return exited >= r.started.Unix()-1 && exited <= r.finished.Unix()+1
}

// realNodePod runs sh -c script in the real node's busybox, as the
// restricted Pod Security level wants it.
func realNodePod(ns, name, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "flaky"}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65534),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "main", Image: cluster.BusyboxImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sh", "-c", script},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
}

// crashLoopRow: 1,000 pods on kwok nodes crash-looping under one PodBugger
// that records, the bench playing their kubelets: every period each pod's
// container fails (exit 1, restart count up, CrashLoopBackOff) and starts
// again. What the manager spends on it: CPU cores on average, its memory,
// API requests and records written per failure.
func (b *bench) crashLoopRow() {
	n := b.s.n(1000)
	const period = 30 * time.Second
	window := 2 * period
	labels := map[string]string{"app": "crashloop"}
	cores, cpuPerFailure, rss := b.perRound(), b.perRound(), b.perRound()
	writesPerFailure, recordsKept, callsPerFailure := b.perRound(), b.perRound(), b.perRound()
	for range b.s.repeat {
		ns := b.namespace("bench-crashloop", nil)
		b.createPods(ns, "crash", n, labels, false)
		b.waitRunning(ns, n)
		b.must(b.c.Client.Create(b.ctx, &debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "catch"},
			Spec: debugv1beta1.PodBuggerSpec{Selector: metav1.LabelSelector{MatchLabels: labels}, Image: "docker.io/library/busybox:1.37",
				Triggers:  []debugv1beta1.Trigger{debugv1beta1.TriggerError, debugv1beta1.TriggerCrashLoopBackOff},
				Incidents: &debugv1beta1.IncidentPolicy{MaxRecords: 200}}}))
		time.Sleep(5 * time.Second) // the PodBugger's first pass over pods that have not failed
		b.warm()
		before, callsBefore := b.mustScrape(b.mgr), b.apiCalls()
		cpuBefore, err := cpuSeconds(b.mgr.p.Pid())
		b.must(err)
		// Where the CPU goes, for go tool pprof: the manager's CPU profile
		// over the failures (bin/bench/cpu-crashloop.pb.gz, the last
		// round's).
		cpuProfile := make(chan error, 1)
		go func() {
			cpuProfile <- saveProfile(b.mgr, fmt.Sprintf("profile?seconds=%d", int(window.Seconds())), "cpu-crashloop.pb.gz")
		}()
		failures := b.playCrashLoops(ns, n, period, window)
		time.Sleep(5 * time.Second) // the last failures' records
		b.must(<-cpuProfile)
		cpuAfter, err := cpuSeconds(b.mgr.p.Pid())
		b.must(err)
		after, callsAfter := b.mustScrape(b.mgr), b.apiCalls()
		spent := cpuAfter - cpuBefore
		cores = append(cores, spent/(window+5*time.Second).Seconds())
		cpuPerFailure = append(cpuPerFailure, spent*1000/float64(failures))
		r, err := rssMiB(b.mgr.p.Pid())
		b.must(err)
		rss = append(rss, r)
		writes := 0.0
		for _, m := range writeMethods {
			writes += after.sum("rest_client_requests_total", label("method", m)) - before.sum("rest_client_requests_total", label("method", m))
		}
		writesPerFailure = append(writesPerFailure, writes/float64(failures))
		callsPerFailure = append(callsPerFailure, (callsAfter-callsBefore)/float64(failures))
		list := &debugv1beta1.PodIncidentList{}
		b.must(b.c.Client.List(b.ctx, list, client.InNamespace(ns)))
		recordsKept = append(recordsKept, float64(len(list.Items)))
		if len(list.Items) > 0 {
			r := list.Items[0].Spec
			fmt.Printf("bench: crash loop: a record: reason %s, count %d, log error %q\n", r.Reason, r.Count, r.LogError)
		}
		counted := after.sum("deckhand_podbugger_incidents_total", label("namespace", ns)) - before.sum("deckhand_podbugger_incidents_total", label("namespace", ns))
		// Logs written into records after them (the second write of a
		// failure whose log was read, or whose node did not answer).
		logWrites := after.sum("deckhand_podbugger_incident_log_seconds_count", nil) - before.sum("deckhand_podbugger_incident_log_seconds_count", nil)
		fmt.Printf("bench: crash loop round: %d failures played, %g counted by the manager, %g logs written after their records, %.3f cores, %d records kept\n",
			failures, counted, logWrites, spent/(window+5*time.Second).Seconds(), len(list.Items))
		b.printManagerErrors("incidents", 3)
		if err := b.saveHeapProfile(b.mgr, "crashloop"); err != nil { // bin/bench/heap-crashloop.pb.gz
			fmt.Printf("bench: crash loop: %v\n", err)
		}
		b.dropNamespace(ns)
	}
	row := fmt.Sprintf("PodBugger recording %d crash-looping pods on kwok (a failure per pod every %s)", n, period)
	f := b.rep.add(&figure{Row: row, Metric: "manager CPU, average", Unit: "cores"}, cores, nil)
	f.judge("≤ 0.2", f.Deckhand <= 0.2)
	b.rep.add(&figure{Row: row, Metric: "manager CPU per failure", Unit: "ms"}, cpuPerFailure, nil)
	f = b.rep.add(&figure{Row: row, Metric: "manager RSS at the end", Unit: "MiB"}, rss, nil)
	f.judge("≤ 64 MiB (the memory gate)", f.Deckhand <= 64)
	b.rep.add(&figure{Row: row, Metric: "manager API requests per failure", Unit: "requests"}, callsPerFailure, nil)
	b.rep.add(&figure{Row: row, Metric: "manager API writes per failure", Unit: "writes"}, writesPerFailure, nil)
	b.rep.add(&figure{Row: row, Metric: "records kept (maxRecords 200)", Unit: "records"}, recordsKept, nil)
}

// playCrashLoops plays the kubelets of n kwok pods for window: each pod's
// container fails once a period (spread over it), as a kubelet reports it,
// the failed instance as the last state and the container waiting in
// CrashLoopBackOff; half a period later it runs again. It returns the
// failures played.
func (b *bench) playCrashLoops(ns string, n int, period, window time.Duration) int {
	restarts := map[string]int32{}
	start := time.Now()
	total := 0
	for tick := time.Duration(0); tick < window; tick += period {
		// Each pod fails at its offset within the period, then recovers.
		slot := period / time.Duration(n)
		for i := range n {
			at := start.Add(tick + time.Duration(i)*slot)
			time.Sleep(time.Until(at))
			name := fmt.Sprintf("crash-%d", i)
			restarts[name]++
			c := restarts[name]
			go func() {
				now := metav1.Now().Rfc3339Copy()
				b.patchContainer(ns, name, c, now, false)
				time.Sleep(period / 2)
				b.patchContainer(ns, name, c, now, true)
			}()
			total++
		}
	}
	time.Sleep(period / 2)
	return total
}

// patchContainer writes pod ns/name's container status as a kubelet would
// after its restarts-th failure at failedAt: waiting in CrashLoopBackOff, or
// running again when running is set.
func (b *bench) patchContainer(ns, name string, restarts int32, failedAt metav1.Time, running bool) {
	state := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
		Message: fmt.Sprintf("back-off 10s restarting failed container=app pod=%s", name)}}
	if running {
		state = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
	}
	status := corev1.ContainerStatus{Name: "app", Image: benchImage, ImageID: benchImage, Ready: running, RestartCount: restarts,
		State: state,
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
			StartedAt: metav1.NewTime(failedAt.Add(-10 * time.Second)), FinishedAt: failedAt,
			ContainerID: fmt.Sprintf("kwok://%s-%d", name, restarts)}}}
	js, _ := json.Marshal(status) // a ContainerStatus always marshals
	patch := fmt.Appendf(nil, `{"status":{"containerStatuses":[%s]}}`, js)
	_, err := b.c.Clientset.CoreV1().Pods(ns).Patch(b.ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		fmt.Printf("bench: crash loop: patching %s: %v\n", name, err)
	}
}

// printManagerErrors prints the last n reconcile errors of the shared
// manager's controller whose name contains controller, and how many it
// logged: what a row's figures alone would not explain.
func (b *bench) printManagerErrors(controller string, n int) {
	var errs []string
	for _, line := range strings.Split(b.mgr.p.Logs(), "\n") {
		if strings.Contains(line, "Reconciler error") && strings.Contains(line, controller) {
			errs = append(errs, line)
		}
	}
	fmt.Printf("bench: %d reconcile errors of %s logged so far\n", len(errs), controller)
	for _, line := range errs[max(0, len(errs)-n):] {
		fmt.Printf("bench:   %s\n", line[:min(len(line), 600)])
	}
}
