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
//   - the owner's watch at the stall: writerShowWait between its looks,
//     each look an exec of the case's sandbox (above); the owner's service
//     showing in the process table: findService's 10 s.
//
// A deadline met is never a pass and never a wait. The host's is a
// provider error of its step (the provider did not answer in time): the
// case stops there, the step's check fails, and whether it is the
// engine's failure (unknown, --resume runs it again) is the engine's word,
// as for any provider error. The probe's own (the exec answered: exit
// probe.ExitDeadline) and any other probe failure at verify are
// verify.owner, failed: a verify that could not look passes nothing.
// Where the harness made a read fail (a marker over the cap, a link), the
// check that needed it fails. docs/threat-model.md, "The owner's reads and
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
// deadline: the host's (ownerSandbox, readBaseline: wrapped in a provider
// error, as the provider did not answer) or the probe's own (exit
// probe.ExitDeadline: the exec answered, so no provider error).
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

// verifyStage runs verify as a stage (stage records a provider error)
// and records what ended it otherwise: the probe's own deadline, a probe
// that exited non-zero or printed no snapshot. Before, such an error left
// no verify check and the case was judged on the others. The check
// verify.owner fails: what verify was to read is not judged (its checks
// after the error are not recorded), and a case cannot pass on a verify
// that did not look; the exec answered, so the engine stands.
func (cr *caseRun) verifyStage(fn func() error) {
	err := cr.stage(reports.StageVerify, fn)
	if err == nil || stopsCase(err) {
		return
	}
	if ownerBlind(err) {
		cr.errType("owner_deadline")
	} else {
		cr.errType("owner_error")
	}
	cr.check("verify.owner", clauseVerify, false, "the owner could not finish verify: %s; what it was to read is not judged", redact(err.Error(), cr.r.key))
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
// runs is a provider error wrapping an *ownerDeadlineError (also when fn
// returned an error just as it passed); ctx ending first is ctx's error,
// as a provider error (the run's hard stop, as the engine's own would be).
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
			return r.v, provider.Errorf(op, o.ID(), &ownerDeadlineError{op: op, after: o.d, by: "the host", err: r.err.Error()})
		}
		return r.v, r.err
	case <-dctx.Done():
		if err := ctx.Err(); err != nil {
			return zero, provider.Errorf(op, o.ID(), err)
		}
		return zero, provider.Errorf(op, o.ID(), &ownerDeadlineError{op: op, after: o.d, by: "the host"})
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
