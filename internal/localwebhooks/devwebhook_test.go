package localwebhooks

import (
	"strings"
	"testing"
)

func TestPointCRDsReplacesTheServiceByTheURL(t *testing.T) {
	in := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: podsets.apps.deckhand.dev
spec:
  conversion:
    strategy: Webhook
    webhook:
      clientConfig:
        service: {namespace: system, name: deckhand-webhook-service, path: /convert}
      conversionReviewVersions: [v1]
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: modelboxes.model.deckhand.dev
spec:
  group: model.deckhand.dev
`
	out, err := PointCRDs([]byte(in), "https://127.0.0.1:9443/convert")
	if err != nil {
		t.Fatal(err)
	}
	got := string(out)
	if strings.Contains(got, "service") || !strings.Contains(got, "url: https://127.0.0.1:9443/convert") {
		t.Errorf("conversion not pointed at the URL alone:\n%s", got)
	}
	if strings.Count(got, "kind: CustomResourceDefinition") != 2 || !strings.Contains(got, "conversionReviewVersions") {
		t.Errorf("CRDs lost or changed beyond their clientConfig:\n%s", got)
	}
}
