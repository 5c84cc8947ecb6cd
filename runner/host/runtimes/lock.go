package runtimes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sandproof/sandproof/runner/warden/proc"
)

// lockOwner is what a lock file holds, one line:
//
//	pid=4242 start=987654 boot=2c1f...-... host=builder
//
// The pid alone could be reused by another process after a crash; the pair
// (pid, start time) under the same boot id cannot.
type lockOwner struct {
	PID   int
	Start uint64
	Boot  string
	Host  string
}

func (o lockOwner) String() string {
	return fmt.Sprintf("pid=%d start=%d boot=%s host=%s\n", o.PID, o.Start, o.Boot, o.Host)
}

func parseOwner(b []byte) (lockOwner, bool) {
	var o lockOwner
	fields := strings.Fields(string(b))
	if len(fields) != 4 {
		return o, false
	}
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return o, false
		}
		var err error
		switch k {
		case "pid":
			o.PID, err = strconv.Atoi(v)
		case "start":
			o.Start, err = strconv.ParseUint(v, 10, 64)
		case "boot":
			o.Boot = v
		case "host":
			o.Host = v
		default:
			return o, false
		}
		if err != nil {
			return o, false
		}
	}
	return o, o.PID > 0
}

func bootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
}

func self() (lockOwner, error) {
	st, err := procStat(os.Getpid())
	if err != nil {
		return lockOwner{}, fmt.Errorf("read own start time: %w", err)
	}
	host, _ := os.Hostname()
	if host == "" || strings.ContainsAny(host, " \n=") {
		host = "unknown"
	}
	return lockOwner{PID: os.Getpid(), Start: st.StartTime, Boot: bootID(), Host: host}, nil
}

func procStat(pid int) (proc.Stat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return proc.Stat{}, err
	}
	return proc.ParseStat(b)
}

// staleAfterMalformed is how old an unreadable lock file must be before it
// counts as abandoned: a holder writes its line right after creating the
// file, so an empty file is normally a lock being taken this instant.
const staleAfterMalformed = 30 * time.Second

// stale reports whether the lock content b names a holder that is gone: a
// pid that no longer exists, or exists with another start time, or a boot
// id that is not this boot's. A holder on another host is never judged
// stale (we cannot see its processes).
func stale(b []byte, mtime time.Time) (bool, string) {
	o, ok := parseOwner(b)
	if !ok {
		if time.Since(mtime) > staleAfterMalformed {
			return true, fmt.Sprintf("unreadable lock %q older than %s", clip(string(b)), staleAfterMalformed)
		}
		return false, ""
	}
	host, _ := os.Hostname()
	if o.Host != host && o.Host != "unknown" {
		return false, ""
	}
	if o.Boot != "" && o.Boot != bootID() {
		return true, "holder was from an earlier boot"
	}
	st, err := procStat(o.PID)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return true, fmt.Sprintf("holder pid %d is gone", o.PID)
		}
		return false, ""
	}
	if st.StartTime != o.Start {
		return true, fmt.Sprintf("pid %d now belongs to another process", o.PID)
	}
	if st.Dead() {
		return true, fmt.Sprintf("holder pid %d is a zombie", o.PID)
	}
	return false, ""
}

// lockPoll is how often a waiter looks at a held lock again.
var lockPoll = 250 * time.Millisecond

// acquireLock takes the lock file at path, waiting while a live process
// holds it, until ctx ends. A stale lock is broken: renamed to a unique name
// (atomic, so two breakers cannot both remove it), re-read, and removed if it
// still is the stale content that was judged; if the rename caught a fresh
// lock instead (taken between the read and the rename), it is put back with
// link(2), which fails rather than overwrite a third one. The returned
// release removes the lock only while it still holds our own line.
func acquireLock(ctx context.Context, path string) (func(), error) {
	me, err := self()
	if err != nil {
		return nil, err
	}
	line := []byte(me.String())
	for {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			_, werr := f.Write(line)
			if werr == nil {
				werr = f.Sync()
			}
			if cerr := f.Close(); werr == nil {
				werr = cerr
			}
			if werr != nil {
				os.Remove(path)
				return nil, fmt.Errorf("write lock %s: %w", path, werr)
			}
			return func() {
				if b, err := os.ReadFile(path); err == nil && bytes.Equal(b, line) {
					os.Remove(path)
				}
			}, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("take lock %s: %w", path, err)
		}
		b, rerr := os.ReadFile(path)
		fi, serr := os.Stat(path)
		if rerr == nil && serr == nil {
			if ok, why := stale(b, fi.ModTime()); ok {
				breakLock(path, b, why)
				continue
			}
		} else if errors.Is(rerr, os.ErrNotExist) || errors.Is(serr, os.ErrNotExist) {
			continue // released between the create and the read
		}
		t := time.NewTimer(lockPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			holder := strings.TrimSpace(string(b))
			return nil, fmt.Errorf("wait for lock %s held by %q: %w", path, holder, ctx.Err())
		case <-t.C:
		}
	}
}

func breakLock(path string, seen []byte, why string) {
	aside := fmt.Sprintf("%s.broken-%d-%d", path, os.Getpid(), time.Now().UnixNano())
	if err := os.Rename(path, aside); err != nil {
		return // someone else broke or released it
	}
	b, err := os.ReadFile(aside)
	if err == nil && !bytes.Equal(b, seen) {
		// Not the lock we judged: give it back unless yet another exists.
		_ = os.Link(aside, path)
		os.Remove(aside)
		return
	}
	Logf("runtimes: broke stale lock %s (%s)", path, why)
	os.Remove(aside)
}
