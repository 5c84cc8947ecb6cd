package proc

import (
	"bytes"
	"strconv"
	"testing"
)

// FuzzParseStat: any bytes a process can make its stat say must parse or be
// refused, never panic; a parsed name is exactly what lies between the
// first '(' and the last ')', and fields after it are plain numbers.
func FuzzParseStat(f *testing.F) {
	for _, comm := range []string{"sleep", "x) S 1 1 1", "$(id)) R 1 1", ")))(((", "a b", "", "evil) 0 0 $((1+1))", "\x00\n)"} {
		f.Add([]byte(statLine(4242, comm, 7, 4242, 4242, 987654)))
	}
	f.Add([]byte("1 (x) S 0x1 1 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1e9"))
	f.Add([]byte("-1 (x) S 1 1 1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := ParseStat(data)
		if err != nil {
			return
		}
		open := bytes.IndexByte(data, '(')
		closing := bytes.LastIndexByte(data, ')')
		if st.Comm != string(data[open+1:closing]) {
			t.Fatalf("comm %q, want %q", st.Comm, data[open+1:closing])
		}
		if st.PID <= 0 || st.PPID < 0 || st.PGID < 0 || st.SID < 0 {
			t.Fatalf("negative or zero ids from %q: %+v", data, st)
		}
		if !bytes.Contains(data, []byte(strconv.FormatUint(st.StartTime, 10))) {
			t.Fatalf("start time %d not in %q", st.StartTime, data)
		}
	})
}

// FuzzLaunchIDs: the environ scanner never panics and only reports ids that
// are in a WARDEN_LAUNCH entry.
func FuzzLaunchIDs(f *testing.F) {
	f.Add([]byte("WARDEN_LAUNCH=outer:inner\x00PATH=/bin\x00"), "inner")
	f.Add([]byte("XWARDEN_LAUNCH=a\x00WARDEN_LAUNCH=\x00"), "a")
	f.Add([]byte("WARDEN_LAUNCH=::a::\x00"), "a")
	f.Add([]byte("WARDEN_LAUNCH=a"), "")
	f.Fuzz(func(t *testing.T, env []byte, id string) {
		ids := LaunchIDs(env)
		for _, got := range ids {
			if got == "" || bytes.IndexByte([]byte(got), ':') >= 0 || bytes.IndexByte([]byte(got), 0) >= 0 {
				t.Fatalf("bad id %q from %q", got, env)
			}
			if !bytes.Contains(env, []byte(got)) {
				t.Fatalf("id %q not in %q", got, env)
			}
		}
		if CarriesLaunch(env, id) && !bytes.Contains(env, []byte(MarkerVar+"=")) {
			t.Fatalf("CarriesLaunch(%q) without a marker in %q", id, env)
		}
	})
}
