package certify_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/certify"
	"github.com/sandproof/sandproof/runner/host/images"
)

// Validate refuses each value it owns with a *UsageError naming the flag
// and quoting the value; Run applies the same rules once its defaults are
// in, so a library caller's bad value is refused the same way.
func TestOptionsValidate(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"warden", "probe", "sandagent"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	good := certify.Options{Parallel: 1, CaptureEntries: 1, Network: "none",
		Warden: filepath.Join(dir, "warden"), Probe: filepath.Join(dir, "probe")}
	if err := good.Validate(); err != nil {
		t.Fatalf("Validate(good) = %v", err)
	}
	tests := []struct {
		edit        func(*certify.Options)
		flag, value string
	}{
		{func(o *certify.Options) { o.Parallel = 0 }, "--parallel", "0"},
		{func(o *certify.Options) { o.Baseline = -1 }, "--baseline", "-1"},
		{func(o *certify.Options) { o.CaptureEntries = 0 }, "--capture-entries", "0"},
		{func(o *certify.Options) { o.Network = "bridge" }, "--network", "bridge"},
		{func(o *certify.Options) { o.Network = "" }, "--network", ""},
		{func(o *certify.Options) { o.Warden = filepath.Join(dir, "nope") }, "--warden", filepath.Join(dir, "nope")},
		{func(o *certify.Options) { o.Probe = filepath.Join(dir, "sub", "probe") }, "--probe", filepath.Join(dir, "sub", "probe")},
		{func(o *certify.Options) { o.Agent = filepath.Join(dir, "nope") }, "--agent", filepath.Join(dir, "nope")},
		{func(o *certify.Options) { o.Scenarios = []string{"timeout", "stall"} }, "--scenario", "stall"},
		{func(o *certify.Options) { o.Scenarios = []string{"borrowed", "borrowed"} }, "--scenario", "borrowed"},
	}
	for _, tt := range tests {
		o := good
		tt.edit(&o)
		var ue *certify.UsageError
		if err := o.Validate(); !errors.As(err, &ue) || ue.Flag != tt.flag || ue.Value != tt.value {
			t.Errorf("Validate with %s %q: %v, want a *UsageError for it", tt.flag, tt.value, err)
		}
	}
	// Run: the defaults fill the zero fields, the rules refuse the rest.
	o := certify.Options{Adapters: []*adapter.Manifest{{Name: "a"}}, Images: []images.Image{{Name: "i", Ref: "r"}},
		Warden: good.Warden, Probe: good.Probe, Baseline: -1}
	var ue *certify.UsageError
	if _, err := certify.Run(context.Background(), o); !errors.As(err, &ue) || ue.Flag != "--baseline" {
		t.Errorf("Run with Baseline -1: %v, want a *UsageError for --baseline", err)
	}
}
