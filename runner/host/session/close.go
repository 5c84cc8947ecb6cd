package session

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/warden/launch"
	"github.com/sandproof/sandproof/runner/warden/receipt"
)

// CloseResult is what close did and found.
type CloseResult struct {
	// Receipts holds every launch's receipt by launch id ("install" for
	// the install step), as the stop at close returned it.
	Receipts map[string]*receipt.Receipt
	// Captured lists the sandbox paths downloaded, with their host paths.
	Captured []Captured
	// Missing lists declared captures that were not there (optional
	// ones included); their absence never removes what was captured.
	Missing []string
	// SessionDirRemoved is set when the session dir was checked gone.
	SessionDirRemoved bool
	// ScratchRemoved lists the adapter's scratch paths close removed
	// (Adapter.Scratch's matches), sorted.
	ScratchRemoved []string
	// Withheld lists what the captures' host copies do not hold as the
	// sandbox had it: links recorded (never created, never followed),
	// specials skipped, files cut at a cap, downloads stopped. Sorted by
	// path.
	Withheld []provider.Withheld
	// WithheldOmitted counts entries past provider.MaxWithheld per
	// download, not listed.
	WithheldOmitted int
	// CaptureCut counts files cut at a cap and downloads stopped.
	CaptureCut int
	// CaptureBytes is what the captures wrote on the host.
	CaptureBytes int64
	// CaptureEntries counts the archive entries the captures took
	// (created on the host or recorded), against the entry budget.
	CaptureEntries int
}

// Captured is one downloaded path.
type Captured struct {
	Path     string // in the sandbox
	HostPath string
}

// Close stops every launch of the session (known to this process or found
// in the session dir), requires a confirmed receipt from each, downloads
// the captures, then removes the session dir. Captures are downloaded even
// when a receipt is not confirmed, so a timed-out run's partial output is
// kept; the error then says which launch was not confirmed. Close may be
// called again and returns the first result.
func (s *Session) Close(ctx context.Context) (*CloseResult, error) {
	s.mu.Lock()
	if s.phase == phaseClosed {
		s.mu.Unlock()
		return s.closeRes, s.closeErr
	}
	wasNew := s.phase == phaseNew
	s.phase = phaseClosed
	s.mu.Unlock()
	res := &CloseResult{Receipts: map[string]*receipt.Receipt{}}
	if wasNew {
		close(s.stopRenw)
		s.closeRes = res
		return res, nil
	}
	err := s.close(ctx, res)
	close(s.stopRenw)
	s.renewWG.Wait()
	s.closeRes, s.closeErr = res, err
	return res, err
}

func (s *Session) close(ctx context.Context, res *CloseResult) error {
	var errs []error
	fail := func(err error) bool {
		if err == nil {
			return false
		}
		errs = append(errs, err)
		return true
	}
	ids, err := s.launchIDs(ctx)
	if fail(err) && provider.IsProviderError(err) {
		return errors.Join(errs...)
	}
	// Stop first, capture second: a harness still writing would make the
	// captures a moving target, and the receipt is what says it stopped.
	// The answers are judged in id order.
	answers := s.stopAll(ctx, ids)
	for i, id := range ids {
		code, rec, err := answers[i].code, answers[i].rec, answers[i].err
		if fail(err) {
			if provider.IsProviderError(err) {
				return errors.Join(errs...)
			}
			continue
		}
		switch {
		case code == wardenGone:
			fail(fmt.Errorf("close launch %q: %w", id, ErrSupervisorGone))
		case rec == nil:
			fail(fmt.Errorf("close launch %q: %w (warden stop exit %d)", id, ErrNoReceipt, code))
		default:
			res.Receipts[id] = rec
			if !rec.CleanupConfirmed {
				fail(&ReceiptError{Launch: id, Receipt: rec, Err: ErrNotConfirmed})
			}
		}
	}
	if err := s.capture(ctx, res); fail(err) && provider.IsProviderError(err) {
		return errors.Join(errs...)
	}
	scratch, err := s.removeScratch(ctx)
	res.ScratchRemoved = scratch
	if fail(err) && provider.IsProviderError(err) {
		return errors.Join(errs...)
	}
	removed, err := s.removeDir(ctx)
	res.SessionDirRemoved = removed
	fail(err)
	if len(errs) > 0 {
		return fmt.Errorf("close session %s: %w", s.id, errors.Join(errs...))
	}
	return nil
}

// stopped is warden stop's answer for one launch.
type stopped struct {
	code int
	rec  *receipt.Receipt
	err  error
}

// stopAll stops the launches of ids and waits for their receipts; the
// launches are independent, so they are stopped side by side. The answers
// are in ids' order.
func (s *Session) stopAll(ctx context.Context, ids []string) []stopped {
	answers := make([]stopped, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := &answers[i]
			a.code, a.rec, _, a.err = s.stopWait(ctx, path.Join(s.dir, "state", id))
		}()
	}
	wg.Wait()
	return answers
}

// launchIDs lists the launches in the session dir, so launches started by
// an earlier host process (one that died) are stopped and captured too. A
// handle that seeded the session knows them all (its own activations and
// the install step) and skips the download.
func (s *Session) launchIDs(ctx context.Context) ([]string, error) {
	ids := map[string]bool{}
	if s.installRan {
		ids["install"] = true
	}
	if !s.seededHere {
		tmp, err := os.MkdirTemp("", "sandproof-state-")
		if err != nil {
			return nil, fmt.Errorf("list launches: %w", err)
		}
		defer os.RemoveAll(tmp)
		err = s.sb.Download(ctx, path.Join(s.dir, "state"), filepath.Join(tmp, "state"))
		if err != nil && !errors.Is(err, provider.ErrPathNotFound) {
			return nil, err
		}
		entries, _ := os.ReadDir(filepath.Join(tmp, "state"))
		for _, e := range entries {
			if e.IsDir() && launch.ValidID(e.Name()) {
				ids[e.Name()] = true
			}
		}
	}
	s.mu.Lock()
	for id := range s.acts {
		ids[id] = true
	}
	s.mu.Unlock()
	out := make([]string, 0, len(ids))
	for id := range ids {
		out = append(out, id)
	}
	slices.Sort(out)
	return out, nil
}

// capture downloads the launches' state dirs (receipts, supervisor logs)
// and run dirs (params, events, stderr), then the adapter's declared files.
// A missing capture is recorded and never stops the others.
func (s *Session) capture(ctx context.Context, res *CloseResult) error {
	lim := s.cfg.CaptureLimits.WithDefaults()
	lim.Confined = !s.cfg.UnconfinedCaptures
	lim.User = ""
	jobs := s.captureJobs()
	covering := coveringJobs(jobs)
	// The state and run dirs first: the receipts and events the case is
	// judged on are never starved of the shared budgets by a flood in a
	// declared capture.
	var own, first []*captureJob
	for i, j := range jobs {
		switch {
		case covering[i] != nil:
		case j.own:
			own = append(own, j)
		default:
			first = append(first, j)
		}
	}
	s.download(ctx, lim, own)
	s.download(ctx, lim, first)
	s.download(ctx, lim, settleCovered(jobs, covering))
	return recordCaptures(res, jobs)
}

// captureJob is one download of close.
type captureJob struct {
	p, dst   string
	optional bool
	user     string // whose ids the read has ("" the provider's)
	own      bool   // the session's state or run dir
	got      provider.Fetched
	err      error
}

// captureJobs are close's downloads, in the order they are recorded: the
// session's state and run dirs, then the adapter's declared captures (a
// database with its journal files).
func (s *Session) captureJobs() []*captureJob {
	var jobs []*captureJob
	add := func(p, dst string, optional bool, user string) {
		jobs = append(jobs, &captureJob{p: p, dst: dst, optional: optional, user: user})
	}
	// The state dirs are warden's (root's); the run dirs and the
	// declared captures are what the harness wrote, read with its ids:
	// a file it could not read itself is not captured.
	add(path.Join(s.dir, "state"), filepath.Join(s.cfg.CaptureDir, "state"), true, "")
	add(path.Join(s.dir, "run"), filepath.Join(s.cfg.CaptureDir, "run"), true, s.cfg.User)
	for _, j := range jobs {
		j.own = true
	}
	if s.adapter.Captures != nil {
		for _, c := range s.adapter.Captures(s.env("", "")) {
			p := strings.TrimPrefix(c.Path, s.prefix)
			dst := filepath.Join(s.cfg.CaptureDir, "files", filepath.FromSlash(path.Clean("/"+p)))
			add(p, dst, c.Optional, s.cfg.User)
			if c.SQLite {
				// The database is only whole with its journal files.
				for _, suf := range []string{"-wal", "-shm", "-journal"} {
					add(p+suf, dst+suf, true, s.cfg.User)
				}
			}
		}
	}
	return jobs
}

// coveringJobs says, for each job, the outermost other job whose download
// brings it along (nil for none): a capture inside another one's path, read
// with the same ids and landing where that download puts it (a database
// declared inside a captured dir, with its journal files). That is one
// round trip instead of several, and the files come from one tar stream.
func coveringJobs(jobs []*captureJob) []*captureJob {
	covering := make([]*captureJob, len(jobs))
	for i, j := range jobs {
		for _, k := range jobs {
			if k != j && k.user == j.user && strings.HasPrefix(j.p, k.p+"/") &&
				j.dst == filepath.Join(k.dst, filepath.FromSlash(strings.TrimPrefix(j.p, k.p+"/"))) &&
				(covering[i] == nil || len(k.p) < len(covering[i].p)) {
				covering[i] = k
			}
		}
	}
	return covering
}

// settleCovered gives each covered job its outcome from the download that
// covered it, and returns those to download on their own: the ones whose
// enclosing download failed for another reason than a missing path.
func settleCovered(jobs, covering []*captureJob) []*captureJob {
	var again []*captureJob
	for i, j := range jobs {
		k := covering[i]
		switch {
		case k == nil:
		case k.err == nil:
			if _, err := os.Lstat(j.dst); errors.Is(err, fs.ErrNotExist) {
				j.err = fmt.Errorf("download %q (inside %q): %w", j.p, k.p, provider.ErrPathNotFound)
			} else if err != nil {
				j.err = err
			}
		case errors.Is(k.err, provider.ErrPathNotFound):
			j.err = fmt.Errorf("download %q (inside %q): %w", j.p, k.p, provider.ErrPathNotFound)
		default:
			again = append(again, j)
		}
	}
	return again
}

// download fetches js within lim, each with its job's ids when confined.
// The downloads are independent (everything is stopped by now): they run
// side by side, four at a time, and are recorded in order afterwards.
func (s *Session) download(ctx context.Context, lim provider.FetchLimits, js []*captureJob) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for _, j := range js {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			l := lim
			if l.Confined {
				l.User = j.user
			}
			j.got, j.err = provider.Fetch(ctx, s.sb, j.p, j.dst, l)
		}()
	}
	wg.Wait()
}

// recordCaptures adds the jobs' outcomes to res in order: a missing
// capture fails close unless optional, a provider failure is returned
// alone, any other failure joins the rest.
func recordCaptures(res *CloseResult, jobs []*captureJob) error {
	var errs []error
	for _, j := range jobs {
		res.Withheld = append(res.Withheld, j.got.Withheld...)
		res.WithheldOmitted += j.got.Omitted
		res.CaptureCut += j.got.Cut
		res.CaptureBytes += j.got.Bytes
		res.CaptureEntries += j.got.Entries
		switch err := j.err; {
		case err == nil:
			res.Captured = append(res.Captured, Captured{Path: j.p, HostPath: j.dst})
		case errors.Is(err, provider.ErrPathNotFound):
			res.Missing = append(res.Missing, j.p)
			if !j.optional {
				errs = append(errs, fmt.Errorf("capture %q: %w", j.p, err))
			}
		case provider.IsProviderError(err):
			return err
		default:
			errs = append(errs, fmt.Errorf("capture %q: %w", j.p, err))
		}
	}
	slices.SortFunc(res.Withheld, func(a, b provider.Withheld) int { return strings.Compare(a.Path, b.Path) })
	return errors.Join(errs...)
}

// removeDir removes the session dir as root with the confined primitive
// (confinedRemove: the session agent, else the rmtree helper) and checks
// it is gone. Without either nothing is removed: the image's rm recursing
// by path as root can be steered out of the dir by a link the harness
// swaps in under home/ or run/ (BusyBox's does: issue 35), and the harness
// cannot remove root's dir itself, so close fails with ErrNotRemoved
// instead (an image without rm works either way).
func (s *Session) removeDir(ctx context.Context) (bool, error) {
	r, by, ok, err := s.confinedRemove(ctx, []string{s.dir})
	switch {
	case err != nil:
		return false, err
	case !ok:
		return false, fmt.Errorf("remove session dir %q: no confined remover (no session agent, no rmtree helper), and rm as root could be steered: %w", s.dir, ErrNotRemoved)
	case r.ExitCode == 127 && by == "the rmtree helper":
		return false, fmt.Errorf("remove session dir %q: the rmtree helper is not there (a seed that failed before its upload): %w", s.dir, ErrNotRemoved)
	case r.ExitCode != 0:
		return false, fmt.Errorf("remove session dir %q with %s: exit %d: %s: %w", s.dir, by, r.ExitCode, firstLine(r.Stderr), ErrNotRemoved)
	}
	there, err := s.exists(ctx, s.dir)
	if err != nil {
		return false, err
	}
	if there {
		return false, fmt.Errorf("remove session dir %q: still there: %w", s.dir, ErrNotRemoved)
	}
	return true, nil
}

// Release gives the sandbox back: an owned one is destroyed and checked
// gone, a borrowed one is left to its owner untouched.
func (s *Session) Release(ctx context.Context) error {
	if !s.cfg.Owned {
		return nil
	}
	if err := s.sb.Destroy(ctx); err != nil {
		return fmt.Errorf("release sandbox: %w", err)
	}
	info, err := s.sb.Inspect(ctx)
	if err != nil {
		return fmt.Errorf("release sandbox: %w", err)
	}
	if info.Exists {
		return provider.Errorf("release", s.sb.ID(), errors.New("sandbox still exists after destroy"))
	}
	return nil
}
