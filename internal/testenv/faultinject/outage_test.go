package faultinject

import (
	"net/http"
	"net/url"
	"testing"
)

// An outage of "/pods" takes pods, one pod and its subresources, across
// namespaces, and leaves PodSets (whose resource begins with "pods") alone.
func TestOutageAffectsWholePathElements(t *testing.T) {
	o := NewOutage("/pods", "/jobs/")
	tests := map[string]bool{
		"/api/v1/pods":                                         true,
		"/api/v1/namespaces/a/pods":                            true,
		"/api/v1/namespaces/a/pods/web-1/status":               true,
		"/apis/batch/v1/namespaces/a/jobs":                     true,
		"/apis/apps.deckhand.dev/v1beta1/namespaces/a/podsets": false,
		"/apis/batch.deckhand.dev/v1/namespaces/a/jobwatchers": false,
		"/api/v1/namespaces/a/events":                          false,
	}
	for path, want := range tests {
		if got := o.affects(&http.Request{URL: &url.URL{Path: path}}); got != want {
			t.Errorf("%s: affected %v, want %v", path, got, want)
		}
	}
}
