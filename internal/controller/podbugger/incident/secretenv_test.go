package incident_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/podbuggertest"
	"github.com/deckhand-dev/deckhand/internal/manager"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// Values no detector knows the shape of: only knowing them removes them.
const (
	takenByKey  = "Zq8canaryplain1"
	takenByFrom = "Kx7-other-canary"
	notTaken    = "Uu9-never-taken"
)

// secretEnvPod is a pod whose environment takes a value of one Secret by
// key and every value of another, and which printed them (and a value of
// the first Secret it does not take) as it failed.
func secretEnvPod(t *testing.T, ns string, secrets client.Reader) {
	t.Helper()
	env.Create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Data: map[string][]byte{"password": []byte(takenByKey + "\n"), "other": []byte(notTaken)}})
	env.Create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api"},
		Data: map[string][]byte{"KEY": []byte(takenByFrom)}})
	opts := podbuggertest.Options(env)
	opts.WatchNamespaces = []string{"kube-system"}
	env.StartManager(t, opts)
	runRecorderWith(t, []string{ns}, func(context.Context, string, string, string, bool, int) (string, bool, error) {
		return "connecting as " + takenByKey + " with " + takenByFrom + "\nfallback " + notTaken + "\nexit 1\n", false, nil
	}, 0, secrets)
	podbuggertest.Recorder(t, env, ns, []debugv1beta1.Trigger{debugv1beta1.TriggerCrashLoopBackOff}, nil)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app", Labels: podbuggertest.Web},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
			Env: []corev1.EnvVar{{Name: "DB", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}}},
			EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "api"}}}},
		}}}}
	env.Create(t, p)
	time.Sleep(time.Second) // the recorder has seen the pod
	g := testenv.NewG(t)
	fresh := &corev1.Pod{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(p), fresh)).To(Succeed())
	at := metav1.NewTime(time.Now().Add(-time.Second).Truncate(time.Second))
	fresh.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Image: "pause", ImageID: "pause", RestartCount: 1,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
			ContainerID: "containerd://instance-1", StartedAt: at, FinishedAt: at, Message: "refused " + takenByFrom}}}}
	fresh.Status.Phase = corev1.PodRunning
	g.Expect(env.Client.Status().Update(ctx, fresh)).To(Succeed())
}

// With --podbugger-redact-secret-env, a record keeps none of the values its
// pod's environment takes from Secrets, wherever they appear, and keeps
// what the pod does not take.
func TestARecordKeepsNoValueItsPodTakesFromSecrets(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	before, _ := testenv.Metric("deckhand_podbugger_secret_env_reads_total", map[string]string{"outcome": "read"})
	secretEnvPod(t, ns, env.Client)
	g.Eventually(podbuggertest.IncidentsIn(env, ns)).WithTimeout(15 * time.Second).Should(ConsistOf(And(
		HaveField("Spec.LogTail", And(Not(ContainSubstring(takenByKey)), Not(ContainSubstring(takenByFrom)),
			ContainSubstring("connecting as [REDACTED:secret-env] with [REDACTED:secret-env]"), ContainSubstring(notTaken))),
		HaveField("Spec.LastFailure.Message", "refused [REDACTED:secret-env]"))))
	g.Expect(testenv.Metric("deckhand_podbugger_secret_env_reads_total", map[string]string{"outcome": "read"})).
		To(BeNumerically(">=", before+2))
}

// A manager that may not read the namespace's Secrets still records the
// failure, cleaned by the detectors alone, and says why in its metric.
func TestARecordIsWrittenWhenItsPodsSecretsCannotBeRead(t *testing.T) {
	g := testenv.NewG(t)
	ns := env.Namespace(t)
	before, _ := testenv.Metric("deckhand_podbugger_secret_env_reads_total", map[string]string{"outcome": "forbidden"})
	nobody, err := client.New(env.UserConfig(t, "nobody"), client.Options{Scheme: manager.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	secretEnvPod(t, ns, nobody)
	g.Eventually(podbuggertest.IncidentsIn(env, ns)).WithTimeout(15 * time.Second).Should(ConsistOf(
		HaveField("Spec.LogTail", ContainSubstring("connecting as "+takenByKey))))
	g.Expect(testenv.Metric("deckhand_podbugger_secret_env_reads_total", map[string]string{"outcome": "forbidden"})).
		To(BeNumerically(">", before))
}
