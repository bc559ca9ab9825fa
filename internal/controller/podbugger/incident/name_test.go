package incident_test

import (
	"testing"

	podbuggercontroller "github.com/deckhand-dev/deckhand/internal/controller/podbugger"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/incident"
)

// The recorder is a part of the PodBugger controller: its Events' reporting
// controller, its logs and its controller's name are that controller's, the
// name --controllers enables. incident cannot import podbugger (podbugger
// imports it), so it spells the name itself; this ties the two spellings.
func TestTheRecorderGoesByThePodBuggerControllersName(t *testing.T) {
	if incident.ReportingController != podbuggercontroller.ControllerName {
		t.Fatalf("the incident recorder reports as %q, the PodBugger controller is %q", incident.ReportingController, podbuggercontroller.ControllerName)
	}
}
