package provider

import (
	"strings"
	"testing"
)

func TestNetwork(t *testing.T) {
	for _, tt := range []struct{ in, want string }{{"", NetworkNone}, {"none", NetworkNone}, {"host", NetworkHost}} {
		if got, err := Network(tt.in); err != nil || got != tt.want {
			t.Errorf("Network(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"bridge", "default", "None", "container:x"} {
		if got, err := Network(bad); err == nil || !strings.Contains(err.Error(), `"`+bad+`"`) {
			t.Errorf("Network(%q) = %q, %v; want an error quoting it", bad, got, err)
		}
	}
}
