package main

import (
	"bytes"
	"strings"
	"testing"
)

// Bad usage exits 2 with a message naming the flag and quoting the value.
func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "usage"},
		{[]string{"run"}, `unknown command "run"`},
		{[]string{"serve", "--window", "12"}, `--window "12"`},
		{[]string{"serve", "--window", "x"}, `--window "x"`},
		{[]string{"serve", "--root", "/no/such/dir"}, `--root "/no/such/dir"`},
		{[]string{"serve", "--listen", "8080"}, `--listen "8080"`},
		{[]string{"serve", "extra"}, `unexpected argument "extra"`},
	} {
		var out, errb bytes.Buffer
		code := run(c.args, strings.NewReader(""), &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("sandagent %q: exit %d, stderr %q; want 2 and %q", c.args, code, errb.String(), c.want)
		}
	}
	// Positive control: good usage is not refused (serve ends at EOF of
	// an empty stdin with a broken channel, 1, not a usage error).
	var out, errb bytes.Buffer
	if code := run([]string{"serve", "--root", t.TempDir()}, strings.NewReader(""), &out, &errb); code == 2 {
		t.Fatalf("good usage refused: %q", errb.String())
	}
	if code := run([]string{"version"}, nil, &out, &errb); code != 0 || !strings.Contains(out.String(), "protocol") {
		t.Fatalf("version: %d %q", code, out.String())
	}
}
