package session_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/local"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/session"
	"github.com/sandproof/sandproof/runner/warden/harness"
)

// script is the test harness: it prints an event, counts its runs, writes
// the prompt to out.txt, leaves a setsid'd sleep behind (its pid in
// sleep.pid), then does what $3 says: "exit", "hang", or "gate" (wait for
// the file "go" in the run dir to appear, then exit).
const script = `
echo '{"type":"start"}'
echo run >> "$1/../runs.log"
printf '%s' "$2" > "$1/out.txt"
setsid sleep 300 </dev/null >/dev/null 2>&1 &
echo "$!" > "$1/sleep.pid"
echo partial
case "$3" in
hang) exec sleep 300 ;;
gate) while [ ! -e "$1/go" ]; do sleep 0.05; done ;;
esac
echo '{"type":"done"}'
`

func testAdapter(mode string) session.Adapter {
	return session.Adapter{
		Name: "test-" + mode,
		Launch: func(e session.Env) (harness.Params, error) {
			return harness.Params{
				Argv: []string{"sh", "-c", script, "sh", e.RunDir, e.Prompt, mode},
				Env:  map[string]string{"HOME": e.Home},
			}, nil
		},
		Captures: func(e session.Env) []session.Capture {
			return []session.Capture{
				{Path: filepath.Join(e.Dir, "run", "a1", "out.txt"), Optional: true},
				{Path: filepath.Join(e.Dir, "home", "state.db"), SQLite: true, Optional: true},
			}
		},
	}
}

func newLocal(t *testing.T, adapter session.Adapter, cfg session.Config) (*session.Session, provider.Sandbox) {
	t.Helper()
	sb, err := local.New(t.TempDir()).Create(context.Background(), provider.CreateSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Destroy(context.Background()) })
	cfg.Binaries = bins
	// The local provider cannot confine a read (provider.ErrUnconfined);
	// these sessions run the suite's own fixtures.
	cfg.UnconfinedCaptures = true
	if cfg.CaptureDir == "" {
		cfg.CaptureDir = t.TempDir()
	}
	s, err := session.New(sb, adapter, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, sb
}

// waitWatch is a sandbox that signals each time a `warden wait` it ran
// has returned.
type waitWatch struct {
	provider.Sandbox
	returned chan struct{}
}

func (w *waitWatch) Exec(ctx context.Context, spec provider.ExecSpec) (provider.ExecResult, error) {
	res, err := w.Sandbox.Exec(ctx, spec)
	if len(spec.Argv) > 1 && spec.Argv[1] == "wait" {
		select {
		case w.returned <- struct{}{}:
		default:
		}
	}
	return res, err
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// alive reports whether pid runs and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && len(b) > i+2 && b[i+2] != 'Z'
}

func readPid(t *testing.T, p string) int {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("read pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %q: %q", p, b)
	}
	return pid
}

func TestLocalSessionEndToEnd(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	s, sb := newLocal(t, testAdapter("exit"), session.Config{ID: "e2e", Owned: true})
	if err := s.Seed(ctx); err != nil {
		t.Fatal(err)
	}
	dirOnHost := s.HostPath(s.Dir())
	if _, err := os.Stat(filepath.Join(dirOnHost, "seeded")); err != nil {
		t.Fatalf("seeded marker: %v", err)
	}
	res, err := s.Activate(ctx, "a1", "token-123", 60)
	if err != nil {
		t.Fatal(err)
	}
	r := res.Receipt
	if r.Cause != "exited" || !r.CleanupConfirmed || r.ReturnCode == nil || *r.ReturnCode != 0 {
		t.Fatalf("activation receipt: cause %q confirmed %t rc %v", r.Cause, r.CleanupConfirmed, r.ReturnCode)
	}
	// Positive control: the setsid'd sleep existed and warden reached it.
	// It is matched by the pid the script recorded, not by name: warden
	// may reach it before setsid(1) has exec'd sleep (comm "setsid").
	sleepPid := readPid(t, filepath.Join(dirOnHost, "run", "a1", "sleep.pid"))
	var reachedSleep bool
	for _, m := range r.Reached {
		reachedSleep = reachedSleep || m.PID == sleepPid
	}
	if !reachedSleep {
		t.Fatalf("receipt reached %+v, want the leftover sleep (pid %d) in it", r.Reached, sleepPid)
	}

	cr, err := s.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := cr.Receipts["a1"]; got == nil || !got.CleanupConfirmed {
		t.Fatalf("close receipt of a1 = %+v", got)
	}
	if !cr.SessionDirRemoved {
		t.Fatal("SessionDirRemoved false")
	}
	if _, err := os.Stat(dirOnHost); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("session dir still there: %v", err)
	}
	if alive(sleepPid) {
		t.Fatalf("leftover sleep %d alive after close", sleepPid)
	}
	capDir := cr.Captured[0].HostPath
	capDir = filepath.Dir(capDir)
	out, err := os.ReadFile(filepath.Join(capDir, "files", s.Dir(), "run", "a1", "out.txt"))
	if err != nil || string(out) != "token-123" {
		t.Fatalf("captured out.txt = %q, %v", out, err)
	}
	events, err := os.ReadFile(filepath.Join(capDir, "run", "a1", "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(events)), "\n")
	if len(lines) != 3 {
		t.Fatalf("events.jsonl has %d lines, want 3:\n%s", len(lines), events)
	}
	var ev struct {
		Event map[string]string `json:"event"`
	}
	if err := json.Unmarshal([]byte(lines[2]), &ev); err != nil || ev.Event["type"] != "done" {
		t.Fatalf("last event %q: %v", lines[2], err)
	}
	if _, err := os.Stat(filepath.Join(capDir, "state", "a1", "receipt.json")); err != nil {
		t.Fatalf("receipt not captured: %v", err)
	}
	if !slicesContain(cr.Missing, filepath.Join(s.Dir(), "home", "state.db")) {
		t.Fatalf("Missing = %q, want the optional state.db", cr.Missing)
	}
	if err := s.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if info, _ := sb.Inspect(ctx); info.Exists {
		t.Fatal("owned sandbox still exists after release")
	}
}

func slicesContain(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func TestLocalTimedOutRunKeepsPartialOutput(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	s, _ := newLocal(t, testAdapter("hang"), session.Config{ID: "timeout", Grace: 500 * time.Millisecond})
	if err := s.Seed(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := s.Activate(ctx, "a1", "tok", 1)
	if err != nil {
		t.Fatal(err)
	}
	if res.Receipt.Cause != "deadline" || !res.Receipt.TimedOut || !res.Receipt.CleanupConfirmed {
		t.Fatalf("receipt cause %q timed_out %t confirmed %t", res.Receipt.Cause, res.Receipt.TimedOut, res.Receipt.CleanupConfirmed)
	}
	cr, err := s.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var events string
	for _, c := range cr.Captured {
		if strings.HasSuffix(c.Path, "/run") {
			b, _ := os.ReadFile(filepath.Join(c.HostPath, "a1", "events.jsonl"))
			events = string(b)
		}
	}
	if !strings.Contains(events, `"raw":"partial"`) || strings.Contains(events, `"done"`) {
		t.Fatalf("events of the timed-out run = %q, want the partial line and no done", events)
	}
}

func TestLocalJoinAndReplay(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	capDir := t.TempDir()
	// No fixed id: the session's own random one (s-<hex>), so that two
	// runs of this test at once (packages in parallel, two checkouts) never
	// share a session dir; the later handles open it by that id.
	cfg := session.Config{CaptureDir: capDir, UnconfinedCaptures: true}
	s, sb := newLocal(t, testAdapter("gate"), cfg)
	cfg.ID = s.ID()
	if err := s.Seed(ctx); err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(s.HostPath(s.Dir()), "run", "a1")

	// The first waiter gives up; the run must go on.
	short, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := s.Activate(short, "a1", "tok", 60)
		errc <- err
	}()
	waitFor(t, func() bool { _, err := os.Stat(filepath.Join(runDir, "sleep.pid")); return err == nil })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: err = %v, want context.Canceled", err)
	}

	// Another host process attaches to the same session and joins.
	cfg.Binaries = bins
	looked := &waitWatch{Sandbox: sb, returned: make(chan struct{}, 16)}
	s2, err := session.Open(ctx, looked, testAdapter("gate"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	joined := make(chan *session.Result, 1)
	go func() {
		r, err := s2.Activate(ctx, "a1", "other prompt", 60)
		if err != nil {
			t.Error(err)
		}
		joined <- r
	}()
	// The gate opens only once the second handle has looked for a receipt
	// and found the launch still running: opened before that look, the
	// launch could end first and the handle would replay, not join.
	select {
	case <-looked.returned:
	case <-ctx.Done():
		t.Fatal("the second handle never looked for the launch")
	}
	if err := os.WriteFile(filepath.Join(runDir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := <-joined
	if r == nil || !r.Joined || r.Receipt.Cause != "exited" {
		t.Fatalf("joined result = %+v", r)
	}
	// Now the receipt is there: a third caller replays it.
	r3, err := s2.Activate(ctx, "a1", "tok", 60)
	if err != nil {
		t.Fatal(err)
	}
	s3, err := session.Open(ctx, sb, testAdapter("gate"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	r4, err := s3.Activate(ctx, "a1", "tok", 60)
	if err != nil || !r4.Replayed || r4.Receipt.LaunchID != r3.Receipt.LaunchID {
		t.Fatalf("replay: %+v, %v", r4, err)
	}
	runs, _ := os.ReadFile(filepath.Join(runDir, "..", "runs.log"))
	if string(runs) != "run\n" {
		t.Fatalf("runs.log = %q, want exactly one run", runs)
	}
	if out, _ := os.ReadFile(filepath.Join(runDir, "out.txt")); string(out) != "tok" {
		t.Fatalf("out.txt = %q, want the first activation's prompt", out)
	}

	// The seeding handle skips the look for an earlier launch of an id it
	// never ran; warden's claim still makes it join one that another
	// handle ran, never run it again.
	runDir2 := filepath.Join(s.HostPath(s.Dir()), "run", "a2")
	ran := make(chan *session.Result, 1)
	go func() {
		r, err := s2.Activate(ctx, "a2", "tok2", 60)
		if err != nil {
			t.Error(err)
		}
		ran <- r
	}()
	waitFor(t, func() bool { _, err := os.Stat(filepath.Join(runDir2, "sleep.pid")); return err == nil })
	if err := os.WriteFile(filepath.Join(runDir2, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r5 := <-ran
	if r5 == nil || r5.Receipt == nil {
		t.Fatalf("a2 through the opened handle: %+v", r5)
	}
	r6, err := s.Activate(ctx, "a2", "tok-again", 60)
	if err != nil || !r6.Joined || r6.Receipt.LaunchID != r5.Receipt.LaunchID {
		t.Fatalf("a2 through the seeding handle: %+v, %v; want it joined to launch %q", r6, err, r5.Receipt.LaunchID)
	}
	runs, _ = os.ReadFile(filepath.Join(runDir, "..", "runs.log"))
	if string(runs) != "run\nrun\n" {
		t.Fatalf("runs.log = %q, want one run of a1 and one of a2", runs)
	}
	if _, err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestLocalRefusals(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	s, sb := newLocal(t, testAdapter("exit"), session.Config{ID: "refuse"})
	if _, err := s.Activate(ctx, "a1", "p", 10); !errors.Is(err, session.ErrNotSeeded) {
		t.Fatalf("activate before seed: %v, want ErrNotSeeded", err)
	}
	// A partly seeded session: the dir exists, the marker does not.
	if err := sb.Mkdir(ctx, "/var/lib/sandproof/refuse/bin", 0o755, 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := session.Open(ctx, sb, testAdapter("exit"), session.Config{ID: "refuse", Binaries: bins, CaptureDir: t.TempDir(), UnconfinedCaptures: true}); !errors.Is(err, session.ErrNotSeeded) {
		t.Fatalf("open partly seeded: %v, want ErrNotSeeded", err)
	}
	if err := s.Seed(ctx); err != nil {
		t.Fatal(err)
	}
	for _, d := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, -1, 4e7} {
		if _, err := s.Activate(ctx, "a1", "p", d); !errors.Is(err, session.ErrBadDeadline) {
			t.Errorf("deadline %v: err = %v, want ErrBadDeadline", d, err)
		}
	}
	if _, err := s.Activate(ctx, "../x", "p", 10); !errors.Is(err, session.ErrBadID) {
		t.Errorf("bad id: err = %v, want ErrBadID", err)
	}
	if _, err := os.Stat(filepath.Join(s.HostPath(s.Dir()), "state", "a1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused activation left a state dir: %v", err)
	}
	if _, err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Activate(ctx, "a2", "p", 10); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("activate after close: %v, want ErrClosed", err)
	}
}

// corrupting uploads other bytes than it is given for bin/warden, as a
// broken transfer or a tampering sandbox would.
type corrupting struct{ provider.Sandbox }

func (c corrupting) Upload(ctx context.Context, p string, data io.Reader, size int64, mode os.FileMode, uid, gid int) error {
	if strings.HasSuffix(p, "/bin/warden") {
		b, _ := io.ReadAll(data)
		b[len(b)/2] ^= 0xff
		data = bytes.NewReader(b)
	}
	return c.Sandbox.Upload(ctx, p, data, size, mode, uid, gid)
}

func TestLocalSeedRefusesTamperedWarden(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	sb, err := local.New(t.TempDir()).Create(ctx, provider.CreateSpec{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := session.New(corrupting{sb}, testAdapter("exit"), session.Config{ID: "tamper", Binaries: bins, CaptureDir: t.TempDir(), UnconfinedCaptures: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Seed(ctx); !errors.Is(err, session.ErrHashMismatch) {
		t.Fatalf("seed with a corrupted warden: %v, want ErrHashMismatch", err)
	}
	if _, err := s.Activate(ctx, "a1", "p", 10); !errors.Is(err, session.ErrNotSeeded) {
		t.Fatalf("activate a partly seeded session: %v, want ErrNotSeeded", err)
	}
	if _, err := s.Close(ctx); err != nil {
		t.Fatalf("close of a broken session: %v", err)
	}
	if _, err := os.Stat(s.HostPath(s.Dir())); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("broken session dir not removed: %v", err)
	}
}

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// downloads records every Download and fails the ones under failUnder
// with a transport-like error.
type downloads struct {
	provider.Sandbox
	mu        sync.Mutex
	paths     []string
	failUnder string
}

func (d *downloads) Download(ctx context.Context, p, hostPath string) error {
	_, err := d.Fetch(ctx, p, hostPath, provider.FetchLimits{})
	return err
}

func (d *downloads) Fetch(ctx context.Context, p, hostPath string, lim provider.FetchLimits) (provider.Fetched, error) {
	d.mu.Lock()
	d.paths = append(d.paths, p)
	d.mu.Unlock()
	if d.failUnder != "" && p == d.failUnder {
		return provider.Fetched{}, errors.New("injected: the engine dropped the stream")
	}
	return provider.Fetch(ctx, d.Sandbox, p, hostPath, lim)
}

// A database declared inside a captured dir comes with the dir's one
// download, its journal files too; a failed dir download falls back to
// downloading each of them.
func TestLocalCaptureInsideCapturedDir(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("dir download fails %t", fail), func(t *testing.T) {
			ctx := ctxT(t, time.Minute)
			ad := session.Adapter{
				Name: "nested",
				Launch: func(e session.Env) (harness.Params, error) {
					return harness.Params{Argv: []string{"sh", "-c",
						`mkdir -p "$1/data" && printf db > "$1/data/t.db" && printf wal > "$1/data/t.db-wal" && echo '{"type":"done"}'`, "sh", e.Home}}, nil
				},
				Captures: func(e session.Env) []session.Capture {
					return []session.Capture{
						{Path: filepath.Join(e.Home, "data", "t.db"), SQLite: true},
						{Path: filepath.Join(e.Home, "data")},
					}
				},
			}
			sb, err := local.New(t.TempDir()).Create(ctx, provider.CreateSpec{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sb.Destroy(context.Background()) })
			capDir := t.TempDir()
			s0, err := session.New(sb, ad, session.Config{ID: "nested", Binaries: bins, CaptureDir: capDir, UnconfinedCaptures: true})
			if err != nil {
				t.Fatal(err)
			}
			dataDir := path.Join(s0.Dir(), "home", "data")
			d := &downloads{Sandbox: sb}
			if fail {
				d.failUnder = dataDir
			}
			s, err := session.New(d, ad, session.Config{ID: "nested", Binaries: bins, CaptureDir: capDir, UnconfinedCaptures: true})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Seed(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Activate(ctx, "a1", "p", 30); err != nil {
				t.Fatal(err)
			}
			d.mu.Lock()
			d.paths = nil
			d.mu.Unlock()
			cr, err := s.Close(ctx)
			if fail {
				if err == nil || !strings.Contains(err.Error(), "injected") {
					t.Fatalf("close with the dir download failing: %v, want the injected error for the dir", err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			db := filepath.Join(capDir, "files", filepath.FromSlash(dataDir), "t.db")
			for f, want := range map[string]string{db: "db", db + "-wal": "wal"} {
				if got, err := os.ReadFile(f); err != nil || string(got) != want {
					t.Errorf("captured %s = %q, %v; want %q", f, got, err, want)
				}
			}
			var captured []string
			for _, c := range cr.Captured {
				captured = append(captured, c.Path)
			}
			dbIn := path.Join(dataDir, "t.db")
			for _, p := range []string{dbIn, dbIn + "-wal"} {
				if !slicesContain(captured, p) {
					t.Errorf("Captured = %q, want %s", captured, p)
				}
			}
			for _, p := range []string{dbIn + "-shm", dbIn + "-journal"} {
				if !slicesContain(cr.Missing, p) {
					t.Errorf("Missing = %q, want %s", cr.Missing, p)
				}
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			dbDownloads := 0
			for _, p := range d.paths {
				if strings.HasPrefix(p, dbIn) {
					dbDownloads++
				}
			}
			if want := map[bool]int{false: 0, true: 4}[fail]; dbDownloads != want {
				t.Errorf("downloads %q: %d of the database and its journal files, want %d", d.paths, dbDownloads, want)
			}
		})
	}
}

// An install step whose CLI cannot start fails seed with warden's runner's
// own word on why, not only its exit status.
func TestLocalInstallFailureSaysWhy(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	ad := testAdapter("exit")
	ad.Files = map[string]session.File{"bin/broken": {Data: []byte("#!/nonexistent/interp\nexit 0\n"), Mode: 0o755}}
	ad.Install = func(e session.Env) (session.Step, error) {
		return session.Step{Params: harness.Params{Argv: []string{filepath.Join(e.Bin, "broken")}, Mode: harness.ModeDirect}, Deadline: 30}, nil
	}
	s, _ := newLocal(t, ad, session.Config{ID: "broken-install"})
	err := s.Seed(ctx)
	var re *session.ReceiptError
	if !errors.As(err, &re) || !errors.Is(err, session.ErrInstallFailed) {
		t.Fatalf("seed: %v, want a ReceiptError for ErrInstallFailed", err)
	}
	if !strings.Contains(re.Said, `#! interpreter "/nonexistent/interp" is missing`) || !strings.Contains(err.Error(), re.Said) {
		t.Fatalf("seed error %q (said %q): want warden's word on the missing interpreter", err, re.Said)
	}
	if _, err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// A session's captures are confined reads unless the caller says its
// harness is trusted: over a provider that cannot confine one (the local
// provider reads by name), close fails each capture with
// provider.ErrUnconfined and writes nothing, rather than follow a link.
// Positive control: the same session with UnconfinedCaptures captures the
// run dir.
func TestLocalConfinedCapturesRefused(t *testing.T) {
	for _, unconfined := range []bool{true, false} {
		ctx := ctxT(t, 2*time.Minute)
		sb, err := local.New(t.TempDir()).Create(ctx, provider.CreateSpec{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sb.Destroy(context.Background()) })
		capDir := t.TempDir()
		s, err := session.New(sb, testAdapter("exit"), session.Config{ID: "confined", Binaries: bins, CaptureDir: capDir, UnconfinedCaptures: unconfined})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Seed(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Activate(ctx, "a1", "token", 60); err != nil {
			t.Fatal(err)
		}
		_, err = s.Close(ctx)
		_, serr := os.Stat(filepath.Join(capDir, "run", "a1", "params.json"))
		if unconfined {
			if err != nil || serr != nil {
				t.Fatalf("positive control, unconfined: close %v, run dir captured: %v", err, serr)
			}
			continue
		}
		if !errors.Is(err, provider.ErrUnconfined) || serr == nil {
			t.Errorf("confined over the local provider: close %v (want ErrUnconfined), run dir on the host: %v", err, serr)
		}
	}
}

// uploads records the sandbox path of every Upload.
type uploads struct {
	provider.Sandbox
	mu    sync.Mutex
	paths []string
}

func (u *uploads) Upload(ctx context.Context, p string, data io.Reader, size int64, mode os.FileMode, uid, gid int) error {
	u.mu.Lock()
	u.paths = append(u.paths, p)
	u.mu.Unlock()
	return u.Sandbox.Upload(ctx, p, data, size, mode, uid, gid)
}

// A warden build the sandbox already holds (certify's owner volume) is
// placed at bin/warden inside the sandbox, not uploaded, and the placed
// file is what seed verifies: the same build seeds a session that runs and
// closes (rmtree's guard finds bin/warden), another build is refused with
// ErrHashMismatch and nothing is activated.
func TestLocalSeedPlacesWardenFromTheSandbox(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	a := runtime.GOARCH
	warden, err := os.ReadFile(bins.Warden[a])
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		held    []byte // what the sandbox holds at /owner/warden
		wantErr error
	}{
		{"the same build", warden, nil},
		{"another build", append(append([]byte{}, warden...), 0), session.ErrHashMismatch},
	} {
		t.Run(c.name, func(t *testing.T) {
			lsb, err := local.New(t.TempDir()).Create(ctx, provider.CreateSpec{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { lsb.Destroy(context.Background()) })
			root := lsb.(*local.Sandbox).Root()
			if err := os.MkdirAll(filepath.Join(root, "owner"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "owner", "warden"), c.held, 0o555); err != nil {
				t.Fatal(err)
			}
			b := bins
			b.WardenAt = map[string]string{a: "/owner/warden"}
			sb := &uploads{Sandbox: lsb}
			s, err := session.New(sb, testAdapter("exit"), session.Config{ID: "placed", Binaries: b,
				CaptureDir: t.TempDir(), UnconfinedCaptures: true, Owned: true})
			if err != nil {
				t.Fatal(err)
			}
			err = s.Seed(ctx)
			for _, p := range sb.paths {
				if strings.HasSuffix(p, "/bin/warden") {
					t.Errorf("warden uploaded to %s although the sandbox holds a build", p)
				}
			}
			if len(sb.paths) == 0 {
				t.Error("no upload recorded at all: the recorder saw nothing (positive control)")
			}
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("seed: %v, want %v", err, c.wantErr)
			}
			placed := filepath.Join(s.HostPath(s.Dir()), "bin", "warden")
			if c.wantErr != nil {
				if _, err := s.Activate(ctx, "a1", "p", 10); !errors.Is(err, session.ErrNotSeeded) {
					t.Fatalf("activate after a refused warden: %v, want ErrNotSeeded", err)
				}
			} else {
				got, err := os.ReadFile(placed)
				if fi, serr := os.Stat(placed); err != nil || serr != nil || !bytes.Equal(got, warden) || fi.Mode().Perm() != 0o755 {
					t.Fatalf("placed warden: %d bytes (%v), stat %v; want the build's %d bytes, 0755", len(got), err, serr, len(warden))
				}
				res, err := s.Activate(ctx, "a1", "token", 60)
				if err != nil || !res.Receipt.CleanupConfirmed {
					t.Fatalf("activate with the placed warden: %+v, %v", res, err)
				}
			}
			cr, err := s.Close(ctx)
			if err != nil {
				t.Fatalf("close: %v", err)
			}
			if _, err := os.Stat(s.HostPath(s.Dir())); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("session dir not removed (SessionDirRemoved %t): %v", cr.SessionDirRemoved, err)
			}
		})
	}
}
