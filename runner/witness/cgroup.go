package witness

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The observer's own reading of cgroup v2, kept apart from warden's
// (runner/warden/stop/cgroup.go) so that the specs that expect tier cgroup decide
// independently whether this host offers it.

// CgroupOf returns the unified (cgroup v2) path of pid: the "0::" line of
// /proc/PID/cgroup, relative to the hierarchy's root.
func CgroupOf(pid int) (string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("pid %d: no 0:: line in /proc/%d/cgroup", pid, pid)
}

// Cgroup2Mount returns where the cgroup2 hierarchy's root is mounted, from
// /proc/self/mountinfo; only a mount of the hierarchy's root ("/") counts,
// which is what a host (not a container) has.
func Cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		before, after, ok := strings.Cut(sc.Text(), " - ")
		if !ok || !strings.HasPrefix(after, "cgroup2 ") {
			continue
		}
		fields := strings.Fields(before)
		if len(fields) >= 5 && fields[3] == "/" {
			return fields[4], nil
		}
	}
	return "", errors.New("no cgroup2 mount of the hierarchy's root in /proc/self/mountinfo")
}

// WritableCgroup2 reports whether this process could give a child a cgroup
// v2 of its own below its own cgroup, the way tier cgroup needs: it makes
// a probe cgroup there, checks that it has cgroup.kill, and removes it.
// The error says why not.
func WritableCgroup2() error {
	mount, err := Cgroup2Mount()
	if err != nil {
		return err
	}
	own, err := CgroupOf(os.Getpid())
	if err != nil {
		return err
	}
	probe := filepath.Join(mount, own, fmt.Sprintf("sandproof-probe-%d", os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil {
		return fmt.Errorf("cannot make a cgroup: %v", err)
	}
	defer os.Remove(probe)
	if _, err := os.Stat(filepath.Join(probe, "cgroup.kill")); err != nil {
		return fmt.Errorf("no cgroup.kill (Linux 5.14+): %v", err)
	}
	return nil
}

// RemoveLaunchCgroup removes the cgroups warden made for launch id below
// this process's own cgroup, if they are empty: what a supervisor that was
// SIGKILLed (a spec's cleanup, a spec about a dead supervisor) leaves. A
// cgroup that still holds a process stays.
func RemoveLaunchCgroup(id string) {
	if id == "" || strings.ContainsAny(id, "/") || id == "." || id == ".." {
		return
	}
	mount, err := Cgroup2Mount()
	if err != nil {
		return
	}
	own, err := CgroupOf(os.Getpid())
	if err != nil {
		return
	}
	top := filepath.Join(mount, own, "warden-"+id)
	for _, sub := range []string{"harness", "services"} {
		dir := filepath.Join(top, sub)
		// Processes KILLed just before are gone from the cgroup only once
		// they have exited: wait for that, briefly.
		for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			data, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
			if err != nil || strings.Contains(string(data), "populated 0") {
				break
			}
		}
		os.Remove(dir)
	}
	os.Remove(top)
}
