package procs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
)

// Result is one finished warden command.
type Result struct {
	Args   []string
	Code   int
	Stdout string
	Stderr string
}

func (r Result) String() string {
	return fmt.Sprintf("warden %q: exit %d\nstdout: %s\nstderr: %s", r.Args, r.Code, r.Stdout, r.Stderr)
}

// CommandTimeout bounds every warden command a spec runs, so a hung warden
// fails its spec instead of the whole suite.
const CommandTimeout = 60 * time.Second

// Warden runs warden bin with args and returns its exit status and output.
// Its stdin is /dev/null; dir, when not empty, is its working directory.
func Warden(ctx context.Context, bin, dir string, args ...string) Result {
	ginkgo.GinkgoHelper()
	ctx, cancel := context.WithTimeout(ctx, CommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// A foreground supervise relays the harness's output; it must not make
	// us wait for descriptors a leaked process holds, so don't wait on the
	// pipes longer than a moment after warden itself exits.
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	res := Result{Args: args, Stdout: stdout.String(), Stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && exit.Exited():
		res.Code = exit.ExitCode()
	case errors.As(err, &exit):
		ws, _ := exit.Sys().(syscall.WaitStatus)
		ginkgo.Fail(fmt.Sprintf("warden %q died of signal %v (or ran past %v)\nstderr: %s", args, ws.Signal(), CommandTimeout, res.Stderr))
	case errors.Is(err, exec.ErrWaitDelay):
		// Exited, but a process it left holds its output pipes open.
		res.Code = cmd.ProcessState.ExitCode()
	default:
		gomega.Expect(err).NotTo(gomega.HaveOccurred(), "run warden %q", args)
	}
	return res
}
