package main

import (
	"slices"
	"testing"
)

// A fail-fast run's report: the spec that failed kills; the one another
// process interrupted because of it does not; a spec that timed out or was
// interrupted for another reason (the suite's timeout) still counts.
func TestFailedSpecsLeavesOutSpecsAnotherProcessInterrupted(t *testing.T) {
	report := `[{"SuiteSucceeded": false, "SpecReports": [
	 {"ContainerHierarchyTexts": ["stop"], "LeafNodeText": "kills", "LeafNodeLabels": ["spec:2-stop-rules"], "State": "failed", "Failure": {"Message": "Expected...", "Location": {"FileName": "/src/conformance/stop_test.go", "LineNumber": 42}}},
	 {"ContainerHierarchyTexts": ["stop"], "LeafNodeText": "bystander", "LeafNodeLabels": ["spec:2-stop-rules"], "State": "interrupted", "Failure": {"Message": "Interrupted by Other Ginkgo Process"}},
	 {"ContainerHierarchyTexts": ["stop"], "LeafNodeText": "hung", "LeafNodeLabels": ["spec:2-stop-rules"], "State": "interrupted", "Failure": {"Message": "Interrupted by Timeout"}},
	 {"ContainerHierarchyTexts": ["stop"], "LeafNodeText": "slow", "LeafNodeLabels": ["spec:2-hold"], "State": "timedout"},
	 {"ContainerHierarchyTexts": ["stop"], "LeafNodeText": "fine", "State": "passed"},
	 {"ContainerHierarchyTexts": ["stop"], "LeafNodeText": "not run", "State": "skipped"}
	]}]`
	got, err := failedSpecs([]byte(report))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range got {
		names = append(names, n)
	}
	slices.Sort(names)
	if want := []string{"stop hung", "stop kills", "stop slow"}; !slices.Equal(names, want) {
		t.Fatalf("failed specs %v, want %v", names, want)
	}
	kills := got["stop kills"]
	if !kills.labels["spec:2-stop-rules"] {
		t.Fatalf("labels of the killing spec: %v", kills.labels)
	}
	if kills.location != "stop_test.go:42" || kills.message != "Expected..." {
		t.Fatalf("where and why the killing spec failed: %q %q", kills.location, kills.message)
	}
}
