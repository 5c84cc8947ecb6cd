package session_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/session"
	"github.com/sandproof/sandproof/runner/warden/harness"
)

// The captures' shared budgets (contract §8 captured files are data), on
// the local provider: close's downloads take from one entry budget and
// one byte budget for the whole case, and the session's own state and
// run dirs take first.

// floodAdapter's harness makes n empty files in each of dirs (under its
// home), all declared captures.
func floodAdapter(n int, dirs ...string) session.Adapter {
	return session.Adapter{
		Name: "flood",
		Launch: func(e session.Env) (harness.Params, error) {
			script := `for d in "$@"; do mkdir -p "$d"; i=0; while [ $i -lt ` + strconv.Itoa(n) + ` ]; do : > "$d/f$i"; i=$((i+1)); done; done; echo '{"type":"done"}'`
			argv := []string{"sh", "-c", script, "sh"}
			for _, d := range dirs {
				argv = append(argv, filepath.Join(e.Home, d))
			}
			return harness.Params{Argv: argv}, nil
		},
		Captures: func(e session.Env) []session.Capture {
			var cs []session.Capture
			for _, d := range dirs {
				cs = append(cs, session.Capture{Path: filepath.Join(e.Home, d)})
			}
			return cs
		},
	}
}

// closeFlood seeds a session of ad, runs it and closes it.
func closeFlood(t *testing.T, ad session.Adapter, cfg session.Config) (*session.Session, *session.CloseResult) {
	t.Helper()
	ctx := ctxT(t, 2*time.Minute)
	s, _ := newLocal(t, ad, cfg)
	if err := s.Seed(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Activate(ctx, "a1", "p", 60); err != nil {
		t.Fatal(err)
	}
	cr, err := s.Close(context.Background())
	if err != nil {
		t.Fatalf("close: %v", err)
	}
	return s, cr
}

// With the default limits, one case's captures share one entry budget
// (provider.DefaultCaseEntries), not one each: two declared dirs of 2,100
// files, each within the budget alone, are cut together. The positive
// control: one of them alone is captured whole.
func TestCapturesShareTheCaseBudget(t *testing.T) {
	const n = 2100
	if n >= provider.DefaultCaseEntries || 2*n <= provider.DefaultCaseEntries {
		t.Fatalf("positive control: %d files a dir against a budget of %d", n, provider.DefaultCaseEntries)
	}
	_, one := closeFlood(t, floodAdapter(n, "one"), session.Config{ID: "flood1"})
	if one.CaptureCut != 0 || one.CaptureEntries < n {
		t.Fatalf("positive control: one dir of %d files: %d entries, %d cut", n, one.CaptureEntries, one.CaptureCut)
	}
	_, two := closeFlood(t, floodAdapter(n, "one", "two"), session.Config{ID: "flood2"})
	if two.CaptureCut == 0 || two.CaptureEntries > provider.DefaultCaseEntries {
		t.Errorf("two dirs of %d files: %d entries, %d cut; want at most %d entries in all, the rest cut",
			n, two.CaptureEntries, two.CaptureCut, provider.DefaultCaseEntries)
	}
}

// The state and run dirs (the receipts, the events) take from the budgets
// before the declared captures: a declared dir that floods the entry
// budget leaves them whole. The positive control: the flood was cut.
func TestCapturesOwnDirsBeforeAFlood(t *testing.T) {
	s, cr := closeFlood(t, floodAdapter(300, "flood"), session.Config{ID: "flood3",
		CaptureLimits: provider.FetchLimits{Entries: provider.NewBudget(60)}})
	if cr.CaptureCut == 0 {
		t.Fatalf("positive control: the flood was not cut (%d entries)", cr.CaptureEntries)
	}
	capDir := ""
	for _, c := range cr.Captured {
		if c.Path == filepath.Join(s.Dir(), "state") {
			capDir = filepath.Dir(c.HostPath)
		}
	}
	if capDir == "" {
		t.Fatalf("the state dir was not captured: %+v", cr.Captured)
	}
	for _, f := range []string{filepath.Join("state", "a1", "receipt.json"), filepath.Join("run", "a1", "events.jsonl")} {
		if _, err := os.Stat(filepath.Join(capDir, f)); err != nil {
			t.Errorf("%s not captured beside the flood: %v", f, err)
		}
	}
}
