package launch

import (
	"os"
	"path/filepath"
	"testing"
)

// Only a stop request that asks for the services stops them: a plain
// stop ({"services":false}), an empty request (what TouchRequest leaves
// on a full disk), one without the field or one that does not parse keeps
// them, and so does no request at all. The positive control: `warden stop
// --services`'s request asks.
func TestStopAsksServicesOnlyWhenAsked(t *testing.T) {
	dir := t.TempDir()
	if StopAsksServices(dir) {
		t.Fatal("no stop request asks for the services")
	}
	for _, tc := range []struct {
		data string
		want bool
	}{
		{`{"services":true}`, true},
		{`{"services":false}`, false},
		{``, false},
		{`{}`, false},
		{`{"services":"yes"}`, false},
		{`services`, false},
	} {
		if err := os.WriteFile(filepath.Join(dir, StopFile), []byte(tc.data), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := StopAsksServices(dir); got != tc.want {
			t.Errorf("stop request %q: asks for the services %t, want %t", tc.data, got, tc.want)
		}
	}
}
