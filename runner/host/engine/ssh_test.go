package engine

import (
	"strings"
	"testing"
)

func TestSSHArgs(t *testing.T) {
	for _, tc := range []struct{ host, want string }{
		{"ssh://engine.example", "-- engine.example docker system dial-stdio"},
		{"ssh://alice@engine.example", "-l alice -- engine.example docker system dial-stdio"},
		{"ssh://alice@engine.example:2222", "-l alice -p 2222 -- engine.example docker system dial-stdio"},
		{"ssh://10.0.0.7:22/", "-p 22 -- 10.0.0.7 docker system dial-stdio"},
		// A host that looks like an option stays an argument: "--" ends
		// ssh's options.
		{"ssh://-oProxyCommand=x", "-- -oProxyCommand=x docker system dial-stdio"},
	} {
		got, err := SSHArgs(tc.host)
		if err != nil || strings.Join(got, " ") != tc.want {
			t.Errorf("SSHArgs(%q) = %q, %v; want %q", tc.host, got, err, tc.want)
		}
	}
	for host, want := range map[string]string{
		"tcp://engine.example:2375":         "not ssh://",
		"ssh://":                            "no host",
		"ssh://engine.example/var/run/x":    "no path or query",
		"ssh://engine.example?socket=x":     "no path or query",
		"ssh://alice:secret@engine.example": "password",
		"ssh://engine.example:0":            `port "0"`,
	} {
		_, err := SSHArgs(host)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), host) {
			t.Errorf("SSHArgs(%q) = %v; want an error naming the address and %q", host, err, want)
		}
	}
}
