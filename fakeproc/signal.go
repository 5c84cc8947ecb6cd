package fakeproc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/sandproof/sandproof/runner/warden/proc"
	"github.com/sandproof/sandproof/runner/warden/stop"
)

type pending struct {
	p   *process
	sig syscall.Signal
}

// Tier names the semantics the kernel simulates: handles pin a process the
// way a pidfd does.
func (k *Kernel) Tier() string { return "subreaper+pidfd" }

// Open is pidfd_open: it pins whichever process holds id.PID now, whatever
// its start time (checking that is the caller's next step). BeforeOpen and
// AfterOpen run around the pinning.
func (k *Kernel) Open(id proc.Identity) (stop.Handle, error) {
	if k.BeforeOpen != nil {
		k.BeforeOpen(id)
	}
	k.mu.Lock()
	p, ok := k.procs[id.PID]
	k.mu.Unlock()
	if !ok {
		return nil, proc.ErrGone
	}
	if k.AfterOpen != nil {
		k.AfterOpen(id)
	}
	return &handle{k: k, p: p}, nil
}

// handle is a pidfd: it names the process object it was opened on, so once
// that process is reaped and its pid reused the handle reaches nobody.
type handle struct {
	k      *Kernel
	p      *process
	closed bool
}

// Signal is pidfd_send_signal. The effect is queued until the next Pause
// (or ApplyPending), as a real signal is handled when the target next runs.
func (h *handle) Signal(sig syscall.Signal) error {
	k := h.k
	k.mu.Lock()
	defer k.mu.Unlock()
	if h.closed {
		return fmt.Errorf("signal through closed handle of %s: %w", h.p.id(), syscall.EBADF)
	}
	d := Delivery{To: h.p.id(), Signal: sig, At: k.opt.Epoch.Add(k.uptime), Round: k.round}
	if k.procs[h.p.PID] != h.p {
		k.lost = append(k.lost, d)
		return proc.ErrGone
	}
	k.delivered = append(k.delivered, d)
	k.queue = append(k.queue, pending{p: h.p, sig: sig})
	return nil
}

func (h *handle) Close() error {
	h.closed = true
	return nil
}

// Deliveries lists every signal that reached a process, in order.
func (k *Kernel) Deliveries() []Delivery {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]Delivery(nil), k.delivered...)
}

// Lost lists signals sent through a handle whose process was already gone
// (ESRCH), or recorded for an identity that no longer exists.
func (k *Kernel) Lost() []Delivery {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]Delivery(nil), k.lost...)
}

// SignalsTo lists the signals that reached the process id, by name
// ("TERM", "KILL", "CONT").
func (k *Kernel) SignalsTo(id proc.Identity) []string {
	var out []string
	for _, d := range k.Deliveries() {
		if d.To == id {
			out = append(out, signalName(d.Signal))
		}
	}
	return out
}

// ApplyPending makes queued signals take effect: KILL ends a process, TERM
// runs its reaction (or stays pending while it is stopped), CONT resumes a
// stopped process and lets a pending TERM act. A signal to a process that
// is gone or a zombie does nothing.
func (k *Kernel) ApplyPending() {
	for {
		k.mu.Lock()
		if len(k.queue) == 0 {
			k.mu.Unlock()
			return
		}
		s := k.queue[0]
		k.queue = k.queue[1:]
		k.mu.Unlock()
		k.apply(s.p, s.sig)
	}
}

func (k *Kernel) apply(p *process, sig syscall.Signal) {
	k.mu.Lock()
	if k.procs[p.PID] != p || !p.alive() {
		k.mu.Unlock()
		return
	}
	// A signal to the process reaches its live threads, the leader's
	// letter aside once it has exited: KILL ends them all, STOP and CONT
	// change every one.
	react := false
	switch sig {
	case syscall.SIGKILL:
		k.exit(p.PID, int(syscall.SIGKILL))
	case syscall.SIGSTOP, syscall.SIGTSTP:
		if !p.Unstoppable {
			p.setState('T')
			k.write(p)
		}
	case syscall.SIGCONT:
		if p.stopped() {
			p.setState('S')
			k.write(p)
			react, p.pendingTERM = p.pendingTERM, false
		}
	case syscall.SIGTERM:
		if p.stopped() {
			p.pendingTERM = true
		} else {
			react = true
		}
	}
	k.mu.Unlock()
	if !react {
		return
	}
	exits := p.OnTERM == nil || p.OnTERM(k, p.id())
	if !exits {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.procs[p.PID] == p {
		k.exit(p.PID, int(syscall.SIGTERM))
	}
}

// BeforeRound schedules fn to run in the pause before the engine's round n
// (n >= 1) rescans, after the signals of round n-1 took effect: a process
// that appears, forks, drops its marker or leaves "during the stop".
func (k *Kernel) BeforeRound(n int, fn func(k *Kernel)) {
	k.t.Helper()
	if n < 1 {
		k.t.Fatalf("fakeproc: schedule before round %d: round 0 is the first scan, set the tree up before Run", n)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.scripts[n] = append(k.scripts[n], fn)
}

// Pause is a stop.Engine pause step: it lets the signals sent in the round
// act, runs what is scripted before the next round, and advances the clock
// by one round.
func (k *Kernel) Pause(_ context.Context, round int, _ []stop.Member) {
	k.ApplyPending()
	k.mu.Lock()
	k.round = round + 1
	if len(k.stale) > 0 {
		clear(k.stale)
		k.syncChildren()
	}
	scripts := k.scripts[round+1]
	delete(k.scripts, round+1)
	k.mu.Unlock()
	for _, fn := range scripts {
		fn(k)
	}
	k.Advance(k.opt.Round)
}

// Engine returns a stop engine wired to the kernel: its tree, its signals,
// its clock and its pause, so a stop runs in simulated time.
func (k *Kernel) Engine(l stop.Launch, grace, killWait time.Duration) *stop.Engine {
	return &stop.Engine{
		Scanner:   &stop.Scanner{FS: k.FS(), Launch: l},
		Signaller: k,
		Grace:     grace,
		KillWait:  killWait,
		Round:     k.opt.Round,
		Clock:     k,
		Pause:     k.Pause,
	}
}

// SignalsFile is where a supervisor run with --proc-root records signals.
func (k *Kernel) SignalsFile() string { return filepath.Join(k.root, ".signals") }

// ApplySignals reads the lines a supervisor binary appended to
// PROC_ROOT/.signals since the last call ("PID START_TIME SIGNAL") and
// applies them at once. A line naming an identity that no longer exists is
// lost, as a pidfd signal to a reaped process is. A line not yet finished
// by its newline is left for the next call.
func (k *Kernel) ApplySignals() ([]Delivery, error) {
	k.mu.Lock()
	f, err := os.Open(k.SignalsFile())
	if errors.Is(err, os.ErrNotExist) {
		k.mu.Unlock()
		return nil, nil
	}
	if err != nil {
		k.mu.Unlock()
		return nil, fmt.Errorf("open signals file: %w", err)
	}
	data, err := io.ReadAll(io.NewSectionReader(f, k.sigOffset, 1<<30))
	f.Close()
	if err != nil {
		k.mu.Unlock()
		return nil, fmt.Errorf("read signals file: %w", err)
	}
	if end := bytes.LastIndexByte(data, '\n'); end >= 0 {
		data = data[:end+1]
	} else {
		data = nil
	}
	k.sigOffset += int64(len(data))
	var applied []Delivery
	var bad error
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		id, sig, err := parseSignalLine(sc.Text())
		if err != nil {
			bad = errors.Join(bad, err)
			continue
		}
		d := Delivery{To: id, Signal: sig, At: k.opt.Epoch.Add(k.uptime), Round: k.round}
		p, ok := k.procs[id.PID]
		if !ok || p.StartTime != id.StartTime {
			k.lost = append(k.lost, d)
			continue
		}
		k.delivered = append(k.delivered, d)
		k.queue = append(k.queue, pending{p: p, sig: sig})
		applied = append(applied, d)
	}
	k.mu.Unlock()
	k.ApplyPending()
	return applied, bad
}

func parseSignalLine(line string) (proc.Identity, syscall.Signal, error) {
	f := bytes.Fields([]byte(line))
	if len(f) != 3 {
		return proc.Identity{}, 0, fmt.Errorf("parse signal line %q: want PID START_TIME SIGNAL", line)
	}
	pid, err1 := strconv.Atoi(string(f[0]))
	start, err2 := strconv.ParseUint(string(f[1]), 10, 64)
	sig, ok := stop.ParseSignal(string(f[2]))
	if err1 != nil || err2 != nil || !ok || pid <= 0 {
		return proc.Identity{}, 0, fmt.Errorf("parse signal line %q: bad pid, start time or signal", line)
	}
	return proc.Identity{PID: pid, StartTime: start}, sig, nil
}

// Follow applies recorded signals as they are written, until ctx ends, so
// a supervisor binary sees its signals act as on a real machine. It polls:
// the writer is another process and the file may not exist yet. The clock
// does not move while following. Run it in a goroutine that recovers
// (GinkgoRecover): a failed write to the tree fails the spec through TB.
func (k *Kernel) Follow(ctx context.Context) error {
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := k.ApplySignals(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			_, err := k.ApplySignals()
			return err
		case <-tick.C:
		}
	}
}

func signalName(sig syscall.Signal) string { return stop.SignalName(sig) }
