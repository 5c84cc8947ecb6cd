package harness

import (
	"slices"
	"strings"
	"testing"
)

func TestParseParamsRefuses(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"argv":["x"],"argvv":[]}`, `unknown field "argvv"`},
		{`{"argv":[]}`, "argv"},
		{`{"argv":[""]}`, "argv[0]"},
		{`null`, "null"},
		{`{"argv":["x"]}{"argv":["y"]}`, "after"},
		{`{"argv":["x"],"mode":"Events"}`, `mode "Events"`},
		{`{"argv":["x"],"mode":"events"}`, "events: required"},
		{`{"argv":["x"],"events":"/e"}`, `events "/e"`},
		{`{"argv":["x"],"line_cap":5}`, "line_cap 5"},
		{`{"argv":["x"],"mode":"events","events":"/e","stdout":"/o"}`, `stdout "/o"`},
		{`{"argv":["x"],"mode":"events","events":"/e","stderr":"/e"}`, `stderr "/e"`},
		{`{"argv":["x"],"mode":"events","events":"/e","line_cap":-1}`, "line_cap -1"},
		{`{"argv":["x"],"env":{"A=B":"c"}}`, `env "A=B"`},
		{`{"argv":["x"],"env":{"WARDEN_LAUNCH":"forged"}}`, `env "WARDEN_LAUNCH"`},
		{`{"argv":["x"],"inherit_env":[""]}`, `inherit_env ""`},
		{`{"argv":["x"],"path_prefix":["bin"]}`, `path_prefix[0] "bin"`},
		{`{"argv":["x"],"path_prefix":["/a:/b"]}`, `path_prefix[0] "/a:/b"`},
		{`{"argv":["x"],"stdin":""}`, `stdin ""`},
		{`{"argv":["x\u0000y"]}`, `argv[0]`},
	} {
		_, err := ParseParams([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseParams(%s): got error %v, want one containing %q", tc.in, err, tc.want)
		}
	}
}

func TestEnviron(t *testing.T) {
	own := map[string]string{"WARDEN_LAUNCH": "a:b", "HOME": "/root", "SECRET": "s", "PATH": "/usr/bin"}
	getenv := func(k string) (string, bool) { v, ok := own[k]; return v, ok }
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{`{"argv":["x"]}`, []string{"WARDEN_LAUNCH=a:b", "PATH=" + DefaultPath}},
		{`{"argv":["x"],"inherit_env":["HOME","MISSING"],"env":{"B":"2","A":"1"}}`,
			[]string{"WARDEN_LAUNCH=a:b", "HOME=/root", "A=1", "B=2", "PATH=" + DefaultPath}},
		{`{"argv":["x"],"inherit_env":["PATH","HOME"],"env":{"HOME":"/h"},"path_prefix":["/p","/q"]}`,
			[]string{"WARDEN_LAUNCH=a:b", "PATH=/p:/q:/usr/bin", "HOME=/h"}},
		{`{"argv":["x"],"env":{"PATH":""},"path_prefix":["/p"]}`, []string{"WARDEN_LAUNCH=a:b", "PATH=/p"}},
	} {
		p, err := ParseParams([]byte(tc.in))
		if err != nil {
			t.Fatalf("ParseParams(%s): %v", tc.in, err)
		}
		if got := p.environ(getenv); !slices.Equal(got, tc.want) {
			t.Errorf("environ for %s:\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}
