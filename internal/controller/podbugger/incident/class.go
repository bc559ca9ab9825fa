package incident

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
)

// kubeletOOMKilled is the reason a kubelet gives a container instance in
// which the kernel killed a process for the container's memory limit.
const kubeletOOMKilled = "OOMKilled"

// classify says what ended f's instance (or, for an eviction or NotReady,
// the pod), from the instance's status and its pod's Events, and says it
// in a sentence. It is pure. The table in docs/guides/podbugger.md is this
// function's; each class is provoked on the real node
// (test/e2e/realnode_incident_test.go).
func classify(pod *corev1.Pod, f failure, events []corev1.Event) (debugv1beta1.IncidentClass, string) {
	switch f.reason {
	case debugv1beta1.IncidentNotReady:
		return debugv1beta1.ClassNotReady, "the pod stayed not Ready"
	case debugv1beta1.IncidentEvicted:
		return classifyEviction(pod)
	}
	i := f.instance
	if i == nil {
		return debugv1beta1.ClassUnknown, ""
	}
	signal := i.Signal
	if signal == 0 && i.ExitCode > 128 && i.ExitCode < 128+65 {
		signal = i.ExitCode - 128 // a shell's and the runtime's way of saying a signal ended it
	}
	switch {
	case i.Reason == kubeletOOMKilled && (i.ExitCode == 128+sigkill || signal == sigkill):
		return debugv1beta1.ClassOOMKilled, "the kernel killed the main process for the container's memory limit"
	case i.Reason == kubeletOOMKilled:
		return debugv1beta1.ClassOOMKilledChild, fmt.Sprintf(
			"the kernel killed a process of the container for its memory limit; the main process then exited with %d", i.ExitCode)
	case i.Reason == "StartError" || i.Reason == "ContainerCannotRun":
		return debugv1beta1.ClassStartError, "the container could not start"
	}
	if probe := probeKill(events, f.container, i.StartedAt.Time, i.FinishedAt.Time); probe != "" {
		return debugv1beta1.ClassProbeFailed, "its kubelet killed it: its " + probe + " probe failed"
	}
	if signal > 0 {
		return debugv1beta1.ClassSignal, "ended by " + signalName(signal)
	}
	if i.ExitCode != 0 {
		return debugv1beta1.ClassExitCode, fmt.Sprintf("the program exited with %d", i.ExitCode)
	}
	return debugv1beta1.ClassUnknown, ""
}

// probeKilled matches the kubelet's Event when it kills a container for a
// probe: "Container app failed liveness probe, will be restarted".
var probeKilled = regexp.MustCompile(`^Container (\S+) failed (liveness|startup) probe`)

// probeKill is the probe ("liveness", "startup") for which its kubelet
// killed container between started and finished (a few seconds' slack:
// the Event's time is the kill's, the instance ends after its grace
// period), or "".
func probeKill(events []corev1.Event, container string, started, finished time.Time) string {
	for _, e := range events {
		m := probeKilled.FindStringSubmatch(e.Message)
		if e.Reason != "Killing" || m == nil || m[1] != container {
			continue
		}
		at := eventTime(e)
		if !at.Before(started.Add(-time.Second)) && !at.After(finished.Add(2*time.Second)) {
			return m[2]
		}
	}
	return ""
}

// eventTime is when e last happened.
func eventTime(e corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	}
	return e.EventTime.Time
}

// classifyEviction tells a kubelet's eviction for node pressure from one
// for a pod's own limits, and both from the eviction API.
func classifyEviction(pod *corev1.Pod) (debugv1beta1.IncidentClass, string) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == "EvictionByEvictionAPI" {
			return debugv1beta1.ClassEvictionAPI, "evicted through the eviction API (a drain, a descheduler)"
		}
	}
	msg := pod.Status.Message
	switch {
	case strings.Contains(msg, "The node was low on resource"):
		return debugv1beta1.ClassNodePressure, "its kubelet evicted it: " + cut(msg, 200)
	case strings.Contains(msg, "exceeds"):
		return debugv1beta1.ClassLimitExceeded, "its kubelet evicted it: " + cut(msg, 200)
	}
	return debugv1beta1.ClassUnknown, "evicted"
}

// linuxSignals are the names and descriptions of Linux's signals, which a
// container's are whatever the manager runs on.
var linuxSignals = map[int32][2]string{
	1: {"SIGHUP", "hangup"}, 2: {"SIGINT", "interrupt"}, 3: {"SIGQUIT", "quit"}, 4: {"SIGILL", "illegal instruction"},
	5: {"SIGTRAP", "trace/breakpoint trap"}, 6: {"SIGABRT", "aborted"}, 7: {"SIGBUS", "bus error"},
	8: {"SIGFPE", "floating point exception"}, 9: {"SIGKILL", "killed"}, 10: {"SIGUSR1", "user defined signal 1"},
	11: {"SIGSEGV", "segmentation fault"}, 12: {"SIGUSR2", "user defined signal 2"}, 13: {"SIGPIPE", "broken pipe"},
	14: {"SIGALRM", "alarm clock"}, 15: {"SIGTERM", "terminated"},
}

// sigkill is Linux's SIGKILL.
const sigkill = 9

// signalName is "SIGSEGV (segmentation fault)" for 11.
func signalName(n int32) string {
	if s, ok := linuxSignals[n]; ok {
		return s[0] + " (" + s[1] + ")"
	}
	return fmt.Sprintf("signal %d", n)
}
