package provider

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Trace wraps sb so every call is logged with its duration through logf: a
// debug aid for finding where a case's time goes (certify turns it on with
// SANDPROOF_TRACE=1). It changes nothing else.
func Trace(sb Sandbox, logf func(format string, args ...any)) Sandbox {
	return &traced{sb: sb, logf: logf}
}

type traced struct {
	sb   Sandbox
	logf func(format string, args ...any)
}

func (t *traced) log(start time.Time, op, what string, err error) {
	st := "ok"
	if err != nil {
		st = "error"
	}
	t.logf("trace %s %6.3fs %s %s", op, time.Since(start).Seconds(), st, what)
}

func (t *traced) ID() string { return t.sb.ID() }

func (t *traced) Exec(ctx context.Context, spec ExecSpec) (ExecResult, error) {
	start := time.Now()
	r, err := t.sb.Exec(ctx, spec)
	argv := spec.Argv
	if len(argv) > 4 {
		argv = argv[:4]
	}
	t.log(start, "exec", strings.Join(argv, " "), err)
	return r, err
}

func (t *traced) Upload(ctx context.Context, path string, data io.Reader, size int64, mode os.FileMode, uid, gid int) error {
	start := time.Now()
	err := t.sb.Upload(ctx, path, data, size, mode, uid, gid)
	t.log(start, "upload", path, err)
	return err
}

func (t *traced) Mkdir(ctx context.Context, path string, mode os.FileMode, uid, gid int) error {
	start := time.Now()
	err := t.sb.Mkdir(ctx, path, mode, uid, gid)
	t.log(start, "mkdir", path, err)
	return err
}

func (t *traced) Download(ctx context.Context, path, hostPath string) error {
	start := time.Now()
	err := t.sb.Download(ctx, path, hostPath)
	t.log(start, "download", path, err)
	return err
}

func (t *traced) Fetch(ctx context.Context, path, hostPath string, lim FetchLimits) (Fetched, error) {
	start := time.Now()
	got, err := Fetch(ctx, t.sb, path, hostPath, lim)
	t.log(start, "download", path, err)
	return got, err
}

func (t *traced) Inspect(ctx context.Context) (Info, error) {
	start := time.Now()
	i, err := t.sb.Inspect(ctx)
	t.log(start, "inspect", "", err)
	return i, err
}

func (t *traced) Destroy(ctx context.Context) error {
	start := time.Now()
	err := t.sb.Destroy(ctx)
	t.log(start, "destroy", "", err)
	return err
}

func (t *traced) Put(ctx context.Context, entries []Entry) error {
	start := time.Now()
	err := Put(ctx, t.sb, entries)
	what := ""
	if len(entries) > 0 {
		what = entries[0].Path
	}
	t.log(start, "put", fmt.Sprintf("%d entries from %s", len(entries), what), err)
	return err
}

// Unwrap returns the traced sandbox, so that As finds its optional parts.
func (t *traced) Unwrap() Sandbox { return t.sb }
