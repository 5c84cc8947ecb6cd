package certify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/probe"
)

// The owner's deadlines, in one place. Nothing the owner does in a case's
// sandbox waits without one, so no harness (and no stuck engine) keeps a
// case, or certify's slot, waiting:
//
//   - every call on the case's sandbox the owner makes (an exec: a probe
//     snapshot, the owner's service start; an upload; a download; the
//     filesystem diff; an inspect) and the wait for the setup run's
//     baseline: Options.OwnerDeadline, DefaultOwnerDeadline unless set.
//     ownerSandbox applies it to the case's sandbox once, where it is
//     made, so a new owner step cannot miss it; the same deadline bounds
//     each bare `docker run` a baseline times (bareRun);
//   - the probe's own run: probe.DefaultDeadline (below the owner's, so a
//     probe the host stopped waiting for ends by itself), exit
//     probe.ExitDeadline;
//   - what the probe reads of one marker: probe.MaxMarkerBytes, so no file
//     a harness plants can make a snapshot slow (a larger file is not
//     hashed, and is changed);
//   - the cancel owner's wait for the writer's first line: writerShowWait
//     (each of its snapshots within it); the owner's service showing in
//     the process table: findService's 10 s.
//
// A deadline met is never a pass and never a wait: the step's check is
// unknown (the owner could not look; --resume runs the case again), or,
// where the harness made the look fail (a marker over the cap), the check
// that needed it fails. docs/threat-model.md, "The owner's reads and
// deadlines", lists each.

// DefaultOwnerDeadline bounds one owner step on a case's sandbox. A probe
// snapshot takes well under a second and an engine round trip a few; two
// minutes is far above both on a loaded machine.
const DefaultOwnerDeadline = 2 * time.Minute

// ownerDeadline is Options.OwnerDeadline, or its default.
func (o Options) ownerDeadline() time.Duration {
	if o.OwnerDeadline > 0 {
		return o.OwnerDeadline
	}
	return DefaultOwnerDeadline
}

// ownerDeadlineError is an owner step that did not end within its
// deadline: the host's (ownerSandbox) or the probe's own (exit
// probe.ExitDeadline). It is not a provider error (the sandbox may be
// fine) and not a finding about the harness: the step's check is unknown.
type ownerDeadlineError struct {
	op    string        // what ran: "exec /sandproof/probe snapshot", "download /task/deliverable.txt"
	after time.Duration // the deadline
	by    string        // "the host" or "the probe itself"
	err   string        // what the call said when it was cut, "" when it never returned
}

func (e *ownerDeadlineError) Error() string {
	s := fmt.Sprintf("owner step %q did not end within %s (%s stopped it at the owner's deadline)", e.op, e.after, e.by)
	if e.err != "" {
		s += ": " + e.err
	}
	return s
}

// Unwrap makes the error a context.DeadlineExceeded to errors.Is.
func (e *ownerDeadlineError) Unwrap() error { return context.DeadlineExceeded }

// ownerBlind reports whether err says the owner could not look in time.
func ownerBlind(err error) bool {
	var de *ownerDeadlineError
	return errors.As(err, &de)
}

// ownerCheck records a check of an owner step: passed without an error,
// unknown when the step met its deadline (ownerBlind), failed otherwise.
func (cr *caseRun) ownerCheck(id, clause string, err error, detail string, args ...any) {
	c := newCheck(id, clause, err == nil, detail, args...)
	if ownerBlind(err) {
		c.Status = reports.StatusUnknown
		cr.errType("owner_deadline")
	}
	cr.ev.Checks = append(cr.ev.Checks, c)
}

// ownerStage runs an owner stage (stage) and records what ended it
// without a provider error (stage records those): a step past its
// deadline, a probe that exited non-zero or printed no snapshot. The
// check STAGE.owner is unknown: what the step was to read is not
// judged, so nothing it would have found is passed (verify's checks
// after it are not recorded), and --resume runs the case again.
func (cr *caseRun) ownerStage(stage string, fn func() error) {
	err := cr.stage(stage, fn)
	if err == nil || stopsCase(err) {
		return
	}
	if ownerBlind(err) {
		cr.errType("owner_deadline")
	} else {
		cr.errType("owner_error")
	}
	cr.ev.Checks = append(cr.ev.Checks, reports.Check{ID: stage + ".owner", Status: reports.StatusUnknown, Clause: clauseFor(stage),
		Detail: fmt.Sprintf("the owner could not finish %s: %s; what it was to read is not judged", stage, redact(err.Error(), cr.r.key))})
}

// withOwnerDeadline is sb with every owner call bounded by d
// (ownerSandbox); a sandbox that reports its diff keeps doing so.
func withOwnerDeadline(sb provider.Sandbox, d time.Duration) provider.Sandbox {
	o := &ownerSandbox{Sandbox: sb, d: d}
	if df, ok := provider.As[provider.Differ](sb); ok {
		return &ownerDiffer{ownerSandbox: o, df: df}
	}
	return o
}

// ownerSandbox bounds every call the owner makes on a case's sandbox by
// its deadline, and returns at the deadline even when the call does not
// (an engine that never answers): the call is left to end on its own, its
// result dropped. Destroy keeps teardown's own bound; the streamed setup
// run (Streamer, found through Unwrap) outlives it by design, and only
// the wait for its baseline is bounded (setupRun).
type ownerSandbox struct {
	provider.Sandbox
	d time.Duration
}

// Unwrap returns the bounded sandbox, so provider.As finds its parts.
func (o *ownerSandbox) Unwrap() provider.Sandbox { return o.Sandbox }

func (o *ownerSandbox) Exec(ctx context.Context, spec provider.ExecSpec) (provider.ExecResult, error) {
	return bounded(ctx, o, "exec "+argvText(spec.Argv), func(ctx context.Context) (provider.ExecResult, error) {
		return o.Sandbox.Exec(ctx, spec)
	})
}

func (o *ownerSandbox) Upload(ctx context.Context, path string, data io.Reader, size int64, mode os.FileMode, uid, gid int) error {
	_, err := bounded(ctx, o, "upload "+path, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, o.Sandbox.Upload(ctx, path, data, size, mode, uid, gid)
	})
	return err
}

func (o *ownerSandbox) Mkdir(ctx context.Context, path string, mode os.FileMode, uid, gid int) error {
	_, err := bounded(ctx, o, "mkdir "+path, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, o.Sandbox.Mkdir(ctx, path, mode, uid, gid)
	})
	return err
}

func (o *ownerSandbox) Download(ctx context.Context, path, hostPath string) error {
	_, err := o.Fetch(ctx, path, hostPath, provider.FetchLimits{})
	return err
}

func (o *ownerSandbox) Fetch(ctx context.Context, path, hostPath string, lim provider.FetchLimits) (provider.Fetched, error) {
	return bounded(ctx, o, "download "+path, func(ctx context.Context) (provider.Fetched, error) {
		return provider.Fetch(ctx, o.Sandbox, path, hostPath, lim)
	})
}

func (o *ownerSandbox) Inspect(ctx context.Context) (provider.Info, error) {
	return bounded(ctx, o, "inspect", o.Sandbox.Inspect)
}

// ownerDiffer is an ownerSandbox over a sandbox that reports its
// filesystem diff, bounded as the rest.
type ownerDiffer struct {
	*ownerSandbox
	df provider.Differ
}

func (o *ownerDiffer) Changes(ctx context.Context) ([]provider.Change, string, error) {
	type diff struct {
		cs  []provider.Change
		how string
	}
	d, err := bounded(ctx, o.ownerSandbox, "filesystem diff", func(ctx context.Context) (diff, error) {
		cs, how, err := o.df.Changes(ctx)
		return diff{cs, how}, err
	})
	return d.cs, d.how, err
}

// bounded runs fn under o's deadline and returns when fn does or when the
// deadline passes, whichever is first. A deadline met while ctx still
// runs is an *ownerDeadlineError (also when fn returned an error just as
// it passed); ctx ending first is ctx's error, as a provider error (the
// run's hard stop, which fails what it cuts, as the engine's own would).
func bounded[T any](ctx context.Context, o *ownerSandbox, op string, fn func(context.Context) (T, error)) (T, error) {
	dctx, cancel := context.WithTimeout(ctx, o.d)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := fn(dctx)
		done <- result{v, err}
	}()
	var zero T
	select {
	case r := <-done:
		if r.err != nil && ctx.Err() == nil && dctx.Err() != nil {
			return r.v, &ownerDeadlineError{op: op, after: o.d, by: "the host", err: r.err.Error()}
		}
		return r.v, r.err
	case <-dctx.Done():
		if err := ctx.Err(); err != nil {
			return zero, provider.Errorf(op, o.ID(), err)
		}
		return zero, &ownerDeadlineError{op: op, after: o.d, by: "the host"}
	}
}

// probeDeadline is the error of a probe run that exited
// probe.ExitDeadline: its own deadline passed.
func probeDeadline(argv []string, stderr []byte) error {
	return &ownerDeadlineError{op: "exec " + argvText(argv), after: probe.DefaultDeadline, by: "the probe itself",
		err: strings.TrimSpace(string(stderr))}
}

// argvText names an exec by its first two words (the probe's path and
// command; nothing past them, which may be long).
func argvText(argv []string) string {
	return strings.Join(argv[:min(2, len(argv))], " ")
}
