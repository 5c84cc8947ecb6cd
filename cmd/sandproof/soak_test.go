package main

import (
	"bytes"
	"strings"
	"testing"
)

// soak's flags are checked before anything is built or run: exit 2, the
// flag named and the value quoted.
func TestSoakFlagsAreChecked(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--cycles", "0"}, `--cycles: bad value 0 (want > 0)`},
		{[]string{"--parallel", "-1"}, `--parallel: bad value -1 (want > 0)`},
		{[]string{"--grace", "1e3"}, `--grace: bad seconds "1e3"`},
		{[]string{"--grace", ".5"}, `--grace: bad seconds ".5"`},
		{[]string{"--tier", "cgroup"}, `--tier: bad value "cgroup" (want auto or subreaper)`},
		{[]string{"--tier", ""}, `--tier: bad value "" (want auto or subreaper)`},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		code := run(&out, &errb, append([]string{"soak"}, tt.args...))
		if code != exitUsage || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("sandproof soak %s: exit %d, stderr %q; want 2 and %q", strings.Join(tt.args, " "), code, errb.String(), tt.want)
		}
	}
}
