package testenv

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FinishJob sets job's status as the Job controller does when the Job ends
// the way how says (batchv1.JobComplete or batchv1.JobFailed) at at: started
// a second before, the interim condition (SuccessCriteriaMet or
// FailureTarget) and the final one, both at at. envtest runs no Job
// controller; the caller writes the status.
func FinishJob(job *batchv1.Job, how batchv1.JobConditionType, at time.Time) {
	ltt := metav1.NewTime(at)
	start := metav1.NewTime(at.Add(-time.Second))
	job.Status.StartTime = &start
	interim := batchv1.JobSuccessCriteriaMet
	if how == batchv1.JobFailed {
		interim = batchv1.JobFailureTarget
		job.Status.Failed = 1
	} else {
		job.Status.Succeeded = 1
		job.Status.CompletionTime = &ltt
	}
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: interim, Status: corev1.ConditionTrue, LastTransitionTime: ltt, Reason: "Test"},
		{Type: how, Status: corev1.ConditionTrue, LastTransitionTime: ltt, Reason: "Test"},
	}
}
