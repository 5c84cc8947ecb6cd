package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/certify"
)

// A run in which the engine failed a case, by its own word, exits 3
// (contract §9 exit statuses: infrastructure outranks a verdict), naming
// the case and the cause, on every attempt the engine fails it; the same
// run without the engine's word on it exits 1 for its unknown case.
func TestCertifyExitsInfraForACaseTheEngineFailed(t *testing.T) {
	const cause = "the engine at unix:///run/docker.sock does not answer: connection refused (after activation's provider error)"
	summary := func(infra string, attempt int) *certify.Summary {
		return &certify.Summary{Counts: map[reports.Status]int{reports.StatusPassed: 1, reports.StatusUnknown: 1},
			Timings: []certify.CaseTiming{
				{CaseID: "debian-12/pi", Status: reports.StatusPassed},
				{CaseID: fmt.Sprintf("old-python/openclaw (attempt %d)", attempt), Status: reports.StatusUnknown, Infrastructure: infra},
			}}
	}
	for _, tc := range []struct {
		name  string
		sum   *certify.Summary
		err   error
		want  int
		names string
	}{
		{"the engine failed a case", summary(cause, 1), nil, exitInfra, "old-python/openclaw"},
		{"the third attempt it failed", summary(cause, 3), nil, exitInfra, "(attempt 3)"},
		{"and a canary leaked", summary(cause, 1), fmt.Errorf("certify: %w", certify.ErrCanaryLeaked), exitInfra, cause},
		// Positive control: an unknown case without the engine's word is
		// a verdict.
		{"an unknown case the engine did not fail", summary("", 1), nil, exitFailed, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := certifyOutcome(tc.sum, tc.err, false)
			// As run maps it: a bare exit status, else the error's class.
			var ee exitError
			got := 0
			if errors.As(err, &ee) {
				got = ee.code
			} else if err != nil {
				got = exitStatus(err)
			}
			if got != tc.want {
				t.Fatalf("exit %d (%v), want %d", got, err, tc.want)
			}
			if tc.names != "" && !strings.Contains(err.Error(), tc.names) {
				t.Fatalf("%q does not name %q", err, tc.names)
			}
			if tc.want == exitInfra && errors.As(err, &ee) {
				t.Fatalf("%v: a bare exit status, with nothing printed", err)
			}
		})
	}
}
