package witness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name, line string
		want       Stat
	}{
		{"real line", "6382 (cat) R 6376 6376 3147 0 -1 4194304 97 0 0 0 0 0 0 0 20 0 1 0 38824 3133440 381 18446744073709551615\n",
			Stat{PID: 6382, PPID: 6376, PGID: 6376, SID: 3147, Comm: "cat", State: 'R', Threads: 1, StartTime: 38824}},
		// The adversary's crafted name: a naive parse would read state S,
		// ppid 1, pgrp 1 out of the name.
		{"crafted name", "4242 (x) S 1 1 $(>p)) S 4241 4242 4242 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 123456 0 0\n",
			Stat{PID: 4242, PPID: 4241, PGID: 4242, SID: 4242, Comm: "x) S 1 1 $(>p)", State: 'S', Threads: 1, StartTime: 123456}},
		{"name with spaces and parens", "77 (a) R 1 (b c) S 12 77 77 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 999 0 0\n",
			Stat{PID: 77, PPID: 12, PGID: 77, SID: 77, Comm: "a) R 1 (b c", State: 'S', Threads: 1, StartTime: 999}},
		{"empty name", "5 () S 1 5 5 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 7 0 0",
			Stat{PID: 5, PPID: 1, PGID: 5, SID: 5, Comm: "", State: 'S', Threads: 1, StartTime: 7}},
		{"zombie", "9 (sleep) Z 1 9 9 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0",
			Stat{PID: 9, PPID: 1, PGID: 9, SID: 9, Comm: "sleep", State: 'Z', Threads: 1, StartTime: 5}},
		// A leader that called pthread_exit: Z, and num_threads counts it
		// and its live thread (a real line of the zombielead fixture).
		{"zombie leader", "21640 (zombielead) Z 2 21640 21640 0 -1 4194368 0 0 0 0 0 0 0 0 20 0 2 0 3853 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
			Stat{PID: 21640, PPID: 2, PGID: 21640, SID: 21640, Comm: "zombielead", State: 'Z', Threads: 2, StartTime: 3853}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStat([]byte(tt.line))
			if err != nil {
				t.Fatalf("ParseStat(%q): %v", tt.line, err)
			}
			if got != tt.want {
				t.Errorf("ParseStat(%q) = %+v, want %+v", tt.line, got, tt.want)
			}
		})
	}
}

func TestDeadCountsThreads(t *testing.T) {
	for _, tt := range []struct {
		st   Stat
		dead bool
	}{
		{Stat{State: 'S', Threads: 1}, false},
		{Stat{State: 'T', Threads: 4}, false},
		{Stat{State: 'Z', Threads: 1}, true},
		{Stat{State: 'Z', Threads: 2}, false}, // its second thread runs
		{Stat{State: 'X', Threads: 1}, true},
	} {
		if got := tt.st.Dead(); got != tt.dead {
			t.Errorf("%c with %d threads: Dead() = %v, want %v", tt.st.State, tt.st.Threads, got, tt.dead)
		}
	}
}

func TestParseStatRejectsBadLines(t *testing.T) {
	for _, line := range []string{
		"",
		"12 cat R 1", // no parentheses
		"(cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0",   // no pid
		"x (cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0", // pid not a number
		"12 (cat R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0", // no closing parenthesis
		"12 (cat) R 1 1 1", // too short: no start time
		"12 (cat) RS 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0",
		"12 (cat) R one 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0",
		"12 (cat) R 1 1 x 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0",
		"12 (cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 -5 0 0",
		"12 (cat) Z 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 x 0 5 0 0", // num_threads not a number
	} {
		if st, err := ParseStat([]byte(line)); err == nil {
			t.Errorf("ParseStat(%q) = %+v, want an error", line, st)
		} else if !strings.HasPrefix(err.Error(), "invalid stat data: ") {
			t.Errorf("ParseStat(%q): error %q does not quote the line", line, err)
		}
	}
}

// statLine is a stat line as the kernel writes it.
func statLine(pid, ppid int, comm, state string, start uint64) string {
	return fmt.Sprintf("%d (%s) %s %d %d %d 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 %d 1000 10 18446744073709551615\n",
		pid, comm, state, ppid, pid, pid, start)
}

// fakeProc writes a proc tree, path -> contents, and returns it.
func fakeProc(t *testing.T, files map[string]string) FS {
	t.Helper()
	root := t.TempDir()
	for path, data := range files {
		path = filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return FS(root)
}

func TestTableFakeProc(t *testing.T) {
	fs := fakeProc(t, map[string]string{
		"42/stat": statLine(42, 1, "tool (x) y", "S", 5000),
		"1/stat":  statLine(1, 0, "sleep", "S", 100),
		"43/stat": statLine(43, 42, "sleep", "Z", 5001),
		// Entries a real /proc has that are not processes, a process
		// that vanished between readdir and open (its dir is there, stat
		// is not), and one that exited between open and read (an empty
		// stat).
		"net/dev":   "x",
		"uptime":    "1 1",
		"77/status": "Name:\tgone\n",
		"78/stat":   "",
	})
	got, err := fs.Table()
	if err != nil {
		t.Fatalf("Table: %v", err)
	}
	want := []Stat{
		{PID: 1, PPID: 0, PGID: 1, SID: 1, Comm: "sleep", State: 'S', Threads: 1, StartTime: 100},
		{PID: 42, PPID: 1, PGID: 42, SID: 42, Comm: "tool (x) y", State: 'S', Threads: 1, StartTime: 5000},
		{PID: 43, PPID: 42, PGID: 43, SID: 43, Comm: "sleep", State: 'Z', Threads: 1, StartTime: 5001},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Table =\n %+v\nwant\n %+v", got, want)
	}
	desc, err := fs.Descendants(1)
	if err != nil || len(desc) != 2 || desc[0].PID != 42 || desc[1].PID != 43 {
		t.Errorf("Descendants(1) = %+v, %v; want 42 then 43", desc, err)
	}
}

func TestLookupAliveFakeProc(t *testing.T) {
	fs := fakeProc(t, map[string]string{
		"42/stat":    statLine(42, 1, "tool", "S", 5000),
		"42/status":  "Name:\ttool\nUid:\t1000\t1001\t1000\t1000\n",
		"42/environ": "A=1\x00WARDEN_LAUNCH=x\x00",
		"43/stat":    statLine(43, 1, "sleep", "Z", 5001),
	})
	for _, tt := range []struct {
		id    ID
		alive bool
		state string
	}{
		{ID{42, 5000}, true, "alive: "},
		{ID{42, 4999}, false, "gone"}, // the pid now names another process
		{ID{43, 5001}, false, "zombie"},
		{ID{44, 1}, false, "gone"},
	} {
		alive, err := fs.Alive(tt.id)
		if err != nil || alive != tt.alive {
			t.Errorf("Alive(%v) = %v, %v; want %v", tt.id, alive, err, tt.alive)
		}
		if s := fs.State(tt.id); !strings.HasPrefix(s, tt.state) {
			t.Errorf("State(%v) = %q, want %q...", tt.id, s, tt.state)
		}
	}
	if _, err := fs.Lookup(ID{42, 4999}); !errors.Is(err, ErrGone) {
		t.Errorf("Lookup of a reused pid: %v, want ErrGone", err)
	}
	if uid, err := fs.UID(42); err != nil || uid != 1000 {
		t.Errorf("UID(42) = %d, %v; want the real uid 1000", uid, err)
	}
	if uid, err := fs.UID(43); err == nil {
		t.Errorf("UID without a status = %d, want an error", uid)
	}
	if env, err := fs.Environ(42); err != nil || fmt.Sprint(env) != "[A=1 WARDEN_LAUNCH=x]" {
		t.Errorf("Environ(42) = %q, %v", env, err)
	}
}

// A stat that does not parse is neither alive nor gone, and a table with
// one cannot be read: a reading error must never pass for a clean verdict.
func TestGarbledStatIsAnError(t *testing.T) {
	fs := fakeProc(t, map[string]string{"1/stat": statLine(1, 0, "sleep", "S", 100), "9/stat": "9 garbage"})
	if alive, err := fs.Alive(ID{9, 1}); err == nil {
		t.Errorf("Alive of a garbled stat = %v, nil; want an error", alive)
	}
	if s := fs.State(ID{9, 1}); !strings.HasPrefix(s, "unreadable: ") {
		t.Errorf("State of a garbled stat = %q", s)
	}
	_, err := fs.Table()
	if err == nil || !strings.Contains(err.Error(), "garbage") {
		t.Fatalf("Table with a garbled stat: err = %v, want one quoting the line", err)
	}
}

func TestTableMissingRoot(t *testing.T) {
	if _, err := FS(filepath.Join(t.TempDir(), "nope")).Table(); err == nil {
		t.Fatal("Table on a missing root: want an error")
	}
}

// startSleeper starts a real child process; the test ends it.
func startSleeper(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sleep: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

func TestRealProc(t *testing.T) {
	cmd := startSleeper(t)
	self, err := Proc.ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if self.PPID != os.Getppid() || self.StartTime == 0 || self.Dead() {
		t.Errorf("own stat %+v: want ppid %d, a start time, alive", self, os.Getppid())
	}
	child, err := Proc.ReadStat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if child.PPID != os.Getpid() || child.Comm != "sleep" || child.StartTime < self.StartTime {
		t.Errorf("child stat %+v: want ppid %d, comm sleep, start >= %d", child, os.Getpid(), self.StartTime)
	}
	table, err := Proc.Table()
	if err != nil {
		t.Fatal(err)
	}
	var seen int
	for _, st := range table {
		if st.ID() == self.ID() || st.ID() == child.ID() {
			seen++
		}
	}
	if seen != 2 {
		t.Errorf("the table of %d processes holds %d of self and child", len(table), seen)
	}
	if uid, err := Proc.UID(os.Getpid()); err != nil || uid != os.Getuid() {
		t.Errorf("UID(self) = %d, %v; want %d", uid, err, os.Getuid())
	}
}
