package incident

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func keyRef(name, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: key, ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}}}
}

func fromRef(name string) corev1.EnvFromSource {
	return corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}
}

// The Secrets a pod's environment takes values from, across its init, app
// and ephemeral containers: the keys taken, all of them for envFrom, and
// at most maxSecretEnvSecrets Secrets.
func TestSecretEnvRefs(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Env: []corev1.EnvVar{keyRef("db", "user"), {Name: "PLAIN", Value: "x"}}}},
		Containers: []corev1.Container{
			{Env: []corev1.EnvVar{keyRef("db", "password"), keyRef("db", "user"), keyRef("api", "token")}},
			{EnvFrom: []corev1.EnvFromSource{fromRef("api"), {ConfigMapRef: &corev1.ConfigMapEnvSource{}}}},
		},
		EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Env: []corev1.EnvVar{keyRef("debug", "k")}}}},
	}}
	refs, more := secretEnvRefs(pod)
	got := fmt.Sprint(refs)
	if want := "[{api []} {db [user password]} {debug [k]}]"; got != want || more {
		t.Errorf("refs %s (more %v), want %s", got, more, want)
	}
	for i := range maxSecretEnvSecrets + 5 {
		pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env, keyRef(fmt.Sprintf("s%02d", i), "k"))
	}
	if refs, more := secretEnvRefs(pod); len(refs) != maxSecretEnvSecrets || !more {
		t.Errorf("a pod naming %d Secrets: %d read (more %v), want %d", maxSecretEnvSecrets+8, len(refs), more, maxSecretEnvSecrets)
	}
}

// What a pod can make the recorder keep of its Secrets is bounded: values
// of at most maxSecretEnvValue bytes, at most maxSecretEnvValues of them,
// and a value's trimmed form beside it.
func TestSecretEnvValuesAreBounded(t *testing.T) {
	data := map[string][]byte{"big": []byte(strings.Repeat("x", maxSecretEnvValue+1)), "line": []byte("hunter22\n")}
	for i := range 2 * maxSecretEnvValues {
		data[fmt.Sprintf("k%03d", i)] = []byte(fmt.Sprintf("value-%03d", i))
	}
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}, Data: data}).Build()
	values := secretEnvValues(context.Background(), c, "ns", []secretEnvRef{{name: "gone", keys: []string{"k"}}, {name: "s"}})
	if len(values) != maxSecretEnvValues {
		t.Errorf("%d values kept, want %d", len(values), maxSecretEnvValues)
	}
	for _, v := range values {
		if len(v) > maxSecretEnvValue {
			t.Errorf("a value of %d bytes kept", len(v))
		}
	}
	values = secretEnvValues(context.Background(), c, "ns", []secretEnvRef{{name: "s", keys: []string{"line"}}})
	if fmt.Sprintf("%q", values) != `["hunter22\n" "hunter22"]` {
		t.Errorf("a value ending in a newline: %q, want it and its trimmed form", values)
	}
}
