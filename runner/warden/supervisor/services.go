package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sandproof/sandproof/runner/warden/launch"
	"github.com/sandproof/sandproof/runner/warden/proc"
	"github.com/sandproof/sandproof/runner/warden/receipt"
	"github.com/sandproof/sandproof/runner/warden/stop"
	"github.com/sandproof/sandproof/runner/warden/version"
)

// startService starts a declared service asked for by `warden service`. It
// starts warden's service reaper (ServiceReaperCommand) in a session of its
// own, which starts COMMAND as the harness's user without this launch's
// marker and stays its parent and subreaper; the reaper is recorded by
// identity, and it and everything below it are the service.
func (s *supervisor) startService(requestName string) {
	path := filepath.Join(s.cfg.State, requestName)
	data, err := os.ReadFile(path)
	os.Remove(path)
	if err != nil {
		return
	}
	var req launch.ServiceRequest
	rec := launch.ServiceRecord{}
	answer := func() {
		out, _ := json.Marshal(rec)
		launch.WriteRequest(s.cfg.State, launch.ServiceRecordFile(rec.Name), out)
	}
	if err := json.Unmarshal(data, &req); err != nil || req.Name == "" || len(req.Argv) == 0 {
		rec.Name = strings.TrimSuffix(strings.TrimPrefix(requestName, "service."), ".request")
		rec.Error = fmt.Sprintf("bad service request %q", data)
		answer()
		return
	}
	rec.Name = req.Name
	if _, dup := s.services[req.Name]; dup {
		rec.Error = fmt.Sprintf("service %q already declared", req.Name)
		answer()
		return
	}
	var env []string
	for _, kv := range harnessEnv(os.Environ(), s.cfg.LaunchID)[1:] {
		env = append(env, kv)
	}
	// Keep an outer launch's marker (a nested launch's services still belong
	// to the outer launch), drop only ours.
	if outer := os.Getenv(proc.MarkerVar); outer != "" {
		env = append([]string{proc.MarkerVar + "=" + outer}, env...)
	}
	argvPath, err := lookPath(req.Argv[0], env)
	if err != nil {
		rec.Error = err.Error()
		answer()
		return
	}
	devnull, _ := os.Open(os.DevNull)
	defer devnull.Close()
	out, err := s.openOutput("service." + req.Name + ".out")
	if err != nil {
		rec.Error = err.Error()
		answer()
		return
	}
	defer out.Close()
	spec, _ := json.Marshal(ServiceSpec{Path: argvPath, Argv: req.Argv, Env: env, Dir: req.Cwd, User: s.cfg.User})
	if req.Cwd != "" {
		if fi, err := os.Stat(req.Cwd); err != nil || !fi.IsDir() {
			rec.Error = fmt.Sprintf("service cwd %q: not a directory", req.Cwd)
			answer()
			return
		}
	}
	sys := &syscall.SysProcAttr{Setsid: true}
	attr := &syscall.ProcAttr{Env: env, Files: []uintptr{devnull.Fd(), out.Fd(), out.Fd()}, Sys: sys}
	reaperArgv := []string{"warden", ServiceReaperCommand, string(spec)}
	svcCg := s.servicesCgroup()
	svcCg.CloneIntoCgroup(sys)
	pid, err := syscall.ForkExec("/proc/self/exe", reaperArgv, attr)
	if err != nil && svcCg != nil {
		s.logf("start service %q in cgroup %s: %v; trying again without the cgroup", req.Name, svcCg.Dir, err)
		sys.UseCgroupFD, sys.CgroupFD = false, 0
		pid, err = syscall.ForkExec("/proc/self/exe", reaperArgv, attr)
		if err == nil {
			s.svcOutside++
		}
	} else if err == nil && svcCg == nil {
		s.svcOutside++
	}
	if err != nil {
		rec.Error = fmt.Sprintf("exec %q: %v", argvPath, err)
		answer()
		return
	}
	id := proc.Identity{PID: pid}
	if st, err := proc.NewFS("").Stat(pid); err == nil {
		id = st.Identity()
	}
	s.services[req.Name] = id
	rec.PID, rec.StartTime = id.PID, id.StartTime
	s.logf("service %q started: pid %d", req.Name, pid)
	answer()
}

// servicesCgroup is the cgroup declared services start in, beside the
// harness's (never inside it: killing the harness's cgroup must not touch a
// service), made with the first service; nil in the subreaper tiers.
func (s *supervisor) servicesCgroup() *stop.Cgroup {
	if s.svcCgroup == nil && s.cgroup != nil {
		cg, err := s.cgroup.Services()
		if err != nil {
			s.logf("services cgroup unavailable, services stop in the subreaper tier: %v", err)
			return nil
		}
		s.svcCgroup = cg
	}
	return s.svcCgroup
}

// serveServices keeps the supervisor alive after the launch's receipt while
// declared services run, as their subreaper, until they all exit or a
// `stop --services` (or a signal to the supervisor) ends them.
func (s *supervisor) serveServices(watch *launch.Watcher, term <-chan os.Signal, since uint64) {
	defer func() {
		if s.svcCgroup != nil {
			if err := s.svcCgroup.Remove(); err != nil {
				s.logf("remove services cgroup: %v", err)
			}
		}
	}()
	if len(s.services) == 0 {
		return
	}
	alive := func() bool {
		for _, id := range s.services {
			if st, err := proc.NewFS("").Stat(id.PID); err == nil && st.StartTime == id.StartTime && !st.Dead() {
				return true
			}
		}
		return false
	}
	wantsServices := func() bool { return launch.StopAsksServices(s.cfg.State) }
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	// Wait for a stop of the services (asked by `warden stop --services`,
	// or warden's own TERM) while any of them lives.
	if !s.waitServicesStop(term, watch.C, tick.C, wantsServices, alive) {
		return
	}
	sc := s.scanner(since)
	sc.ServicesOnly = true
	eng := &stop.Engine{Scanner: sc, Signaller: stop.NewSignaller(s.fs), Grace: s.cfg.Grace,
		Log: func(line string) { s.logf("services: %s", line) }}
	tier := eng.Signaller.Tier()
	if s.svcCgroup != nil && s.svcOutside == 0 {
		// Every service started in the services' cgroup: the stop of the
		// services may freeze and kill it whole.
		eng.Cgroup, tier = s.svcCgroup, receipt.TierCgroup
	}
	res := eng.Run(context.Background())
	s.reapAdopted()
	r := receipt.New(s.cfg.LaunchID, version.String())
	r.Cause = receipt.CauseStopped
	r.Stopped = true
	r.StartedAt = receipt.Timestamp(s.start)
	r.Tier = tier
	r.StopSeconds = res.Seconds
	r.Reached, r.Survivors, r.Unverified = nonNil(res.Reached), nonNil(res.Survivors), nonNil(res.Unverified)
	r.CleanupConfirmed = res.Confirmed
	r.EndedAt = receipt.Timestamp(time.Now())
	data, _ := json.MarshalIndent(r, "", "  ")
	if err := launch.WriteRequest(s.cfg.State, launch.ServicesRcp, append(data, '\n')); err != nil {
		s.logf("write services receipt: %v", err)
	}
}

// waitServicesStop waits until the services are to be stopped (a stop
// request asks for them, or term arrives) and reports true; it reports
// false when every service ended on its own first. Any wake-up (a change
// in the state dir, the harness's exit, the tick) looks again.
func (s *supervisor) waitServicesStop(term <-chan os.Signal, changed <-chan string, tick <-chan time.Time, wanted, alive func() bool) bool {
	for !wanted() {
		if !alive() {
			return false
		}
		select {
		case <-term:
			return true
		case <-changed:
		case <-s.exitedCh:
		case <-tick:
		}
	}
	return true
}
