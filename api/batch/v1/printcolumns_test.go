package v1

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// kubectl prints a date column as the age of its time: a time to come shows
// as <invalid>. The watchers' Next column (the next deletion, a future time)
// is therefore a string, printed as the time itself.
func TestPrinterColumnsShowTimesToComeAsTimes(t *testing.T) {
	for _, file := range []string{"batch.deckhand.dev_jobwatchers.yaml", "batch.deckhand.dev_clusterjobwatchers.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "crd", "bases", file))
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, version := range crd.Spec.Versions {
			found := false
			for _, column := range version.AdditionalPrinterColumns {
				if !strings.HasPrefix(column.JSONPath, ".status.next") {
					continue
				}
				found = true
				if column.Type == "date" {
					t.Errorf("%s %s: column %s (%s) is a date, which kubectl prints as an age: <invalid> for a time to come", file, version.Name, column.Name, column.JSONPath)
				}
			}
			if !found {
				t.Errorf("%s %s: no column shows .status.next*", file, version.Name)
			}
		}
	}
}
