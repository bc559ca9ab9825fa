package jobwatcher

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestSlimJobKeepsWhatDecisionsRead(t *testing.T) {
	doneAt := metav1.NewTime(time.Now())
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: "pi", Namespace: "ns", UID: "u1",
			Labels:        map[string]string{"team": "a"},
			Annotations:   map[string]string{"batch.deckhand.dev/ttl": "1h"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		},
		Spec: batchv1.JobSpec{
			TTLSecondsAfterFinished: ptr.To[int32](30),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "pi", Image: "perl", Command: []string{"perl", "-e", "print 1"}}},
			}},
		},
		Status: batchv1.JobStatus{
			Conditions: []batchv1.JobCondition{
				{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: doneAt, Message: "m"},
				{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: doneAt, Reason: "CompletionsReached", Message: "m"},
			},
			CompletionTime: &doneAt,
		},
	}
	want := job.DeepCopy()

	out, err := slimJob(job)
	if err != nil {
		t.Fatal(err)
	}
	held, ok := out.(*cachedJob)
	if !ok {
		t.Fatalf("a Job is cached as %T", out)
	}
	slim := held.job()
	if len(slim.Spec.Template.Spec.Containers) != 0 || slim.ManagedFields != nil {
		t.Errorf("template or managedFields kept: %+v", slim)
	}
	if slim.Name != want.Name || slim.UID != want.UID || slim.Labels["team"] != "a" ||
		slim.Annotations["batch.deckhand.dev/ttl"] != "1h" || *slim.Spec.TTLSecondsAfterFinished != 30 ||
		len(slim.Status.Conditions) != 1 {
		t.Errorf("slimJob dropped what decisions read: got %+v", slim)
	}
	o, at, ok := finished(slim)
	wo, wat, _ := finished(want)
	if !ok || o != wo || !at.Equal(wat) || decide(slim, nil, nil).Verdict != decide(want, nil, nil).Verdict {
		t.Errorf("the slim Job finished %v at %v (%v), want %v at %v", o, at, ok, wo, wat)
	}
}
