package proc

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// A real stat line (52 fields) with the name replaced by whatever the test
// wants; the supervisor reads fields 3-8 and 22.
func statLine(pid int, comm string, ppid, pgid, sid int, start uint64) string {
	return strconv.Itoa(pid) + " (" + comm + ") S " + strconv.Itoa(ppid) + " " + strconv.Itoa(pgid) + " " +
		strconv.Itoa(sid) + " 34816 1234 4194560 125 0 0 0 0 0 0 0 20 0 1 0 " + strconv.FormatUint(start, 10) +
		" 8888888 222 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
}

func TestParseStatCraftedNames(t *testing.T) {
	cases := []struct {
		name, comm string
	}{
		{"plain", "sleep"},
		{"paren and space", "x) S 1 1 1"},
		{"command substitution", "$(id)) R 1 1"},
		{"only parens", ")))((("},
		{"spaces", "a b c"},
		{"empty", ""},
		{"newline", "a\nb"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, err := ParseStat([]byte(statLine(4242, tc.comm, 7, 4242, 4242, 987654)))
			if err != nil {
				t.Fatalf("ParseStat: %v", err)
			}
			want := Stat{PID: 4242, Comm: tc.comm, State: 'S', PPID: 7, PGID: 4242, SID: 4242, Threads: 1, StartTime: 987654}
			if st != want {
				t.Fatalf("got %+v, want %+v", st, want)
			}
		})
	}
}

func TestParseStatRejectsGarbage(t *testing.T) {
	for _, line := range []string{
		"",
		"no parens at all",
		"12 (x",
		"abc (x) S 1 1 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 5",
		"12 (x) S 1 1",
		"12 (x) S -1 1 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 5",
		"12 (x) S 0x1 1 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 5",
		"12 (x) S 1 1 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1e3",
		"12 (x) SS 1 1 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 5",
		"12 (x) S 1 1 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 99999999999999999999999",
	} {
		if st, err := ParseStat([]byte(line)); err == nil {
			t.Errorf("ParseStat(%q) = %+v, want an error", line, st)
		} else if !errors.Is(err, ErrBadStat) {
			t.Errorf("ParseStat(%q): error %v does not wrap ErrBadStat", line, err)
		}
	}
}

func TestParseStatRealSelf(t *testing.T) {
	st, err := NewFS("").Stat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.PID != os.Getpid() || st.PPID != os.Getppid() || st.StartTime == 0 {
		t.Fatalf("own stat %+v: pid/ppid/start wrong (pid %d ppid %d)", st, os.Getpid(), os.Getppid())
	}
}

func TestScanSkipsJunkAndVanished(t *testing.T) {
	root := t.TempDir()
	write := func(name, content string) {
		dir := filepath.Join(root, name)
		os.MkdirAll(dir, 0o755)
		if content != "" {
			os.WriteFile(filepath.Join(dir, "stat"), []byte(content), 0o644)
		}
	}
	write("1", statLine(1, "init", 0, 1, 1, 1))
	write("20", statLine(20, "evil) S 1 1", 1, 20, 20, 50))
	write("self", statLine(1, "init", 0, 1, 1, 1))
	write("12a", statLine(12, "x", 1, 12, 12, 5))
	write("30", "")                                 // vanished: no stat file
	write("40", "garbage")                          // unparsable
	write("50", statLine(51, "liar", 1, 51, 51, 5)) // names another pid
	stats, err := NewFS(root).Scan()
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]string{}
	for _, s := range stats {
		got[s.PID] = s.Comm
	}
	if len(got) != 2 || got[1] != "init" || got[20] != "evil) S 1 1" {
		t.Fatalf("scan = %v, want pids 1 and 20 only", got)
	}
}

func TestLaunchIDs(t *testing.T) {
	env := []byte("WARDEN_LAUNCHX=nope\x00PATH=/bin\x00WARDEN_LAUNCH=outer:inner\x00HOME=/\x00")
	ids := LaunchIDs(env)
	if len(ids) != 2 || ids[0] != "outer" || ids[1] != "inner" {
		t.Fatalf("LaunchIDs = %q", ids)
	}
	if !CarriesLaunch(env, "inner") || CarriesLaunch(env, "inn") || CarriesLaunch(env, "nope") {
		t.Fatal("CarriesLaunch matched wrongly")
	}
	if LaunchIDs([]byte("PATH=/bin\x00")) != nil {
		t.Fatal("no marker should give nil")
	}
}

func TestEnvironBounded(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "7"), 0o755)
	big := make([]byte, 3<<20)
	os.WriteFile(filepath.Join(root, "7", "environ"), big, 0o644)
	data, err := NewFS(root).Environ(7, 1<<20, 1e9)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 1<<20 {
		t.Fatalf("read %d bytes, want the 1 MiB bound", len(data))
	}
	if _, err := NewFS(root).Environ(8, 1<<20, 1e9); !errors.Is(err, ErrGone) {
		t.Fatalf("missing environ: %v, want ErrGone", err)
	}
}
