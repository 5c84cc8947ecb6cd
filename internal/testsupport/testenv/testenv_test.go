package testenv

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// recTB records how a helper ended the test; like the real one, Fatal and
// Skip do not return.
type recTB struct {
	testing.TB
	fatal, skip string
}

func (r *recTB) Helper() {}

func (r *recTB) end(into *string, msg string) {
	*into = msg
	runtime.Goexit()
}

func (r *recTB) Fatal(args ...any)                 { r.end(&r.fatal, fmt.Sprint(args...)) }
func (r *recTB) Fatalf(format string, args ...any) { r.end(&r.fatal, fmt.Sprintf(format, args...)) }
func (r *recTB) Skip(args ...any)                  { r.end(&r.skip, fmt.Sprint(args...)) } // where Missing ends unless strict
func (r *recTB) Skipf(format string, args ...any)  { r.end(&r.skip, fmt.Sprintf(format, args...)) }

// end runs f against a recTB in its own goroutine and returns how it ended.
func end(f func(tb testing.TB)) *recTB {
	r := &recTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}

func TestMissingSkipsUnlessStrict(t *testing.T) {
	missing := func(tb testing.TB) { NoEngine(tb, errors.New("dial unix /x.sock:\nno such file")) }
	for _, tt := range []struct {
		strict     string
		fail, skip bool
	}{{"", false, true}, {"0", false, true}, {"1", true, false}} {
		t.Setenv(StrictEnv, tt.strict)
		r := end(missing)
		if (r.fatal != "") != tt.fail || (r.skip != "") != tt.skip {
			t.Fatalf("%s=%q: fatal %q, skip %q", StrictEnv, tt.strict, r.fatal, r.skip)
		}
		line := r.fatal + r.skip
		if strings.Contains(line, "\n") || !strings.Contains(line, "missing a Docker engine (dial unix /x.sock: no such file)") ||
			!strings.Contains(line, "bash images/engine.sh start") {
			t.Errorf("%s=%q: line %q: want one line naming the engine and how to start it", StrictEnv, tt.strict, line)
		}
	}
}

func TestDockerOptIn(t *testing.T) {
	for _, tt := range []struct {
		docker, strict string
		skip           bool
	}{{"", "", true}, {"1", "", false}, {"", "1", false}} {
		t.Setenv(DockerEnv, tt.docker)
		t.Setenv(StrictEnv, tt.strict)
		r := end(func(tb testing.TB) { Docker(tb) })
		if (r.skip != "") != tt.skip || r.fatal != "" {
			t.Errorf("%s=%q %s=%q: skip %q, fatal %q", DockerEnv, tt.docker, StrictEnv, tt.strict, r.skip, r.fatal)
		}
	}
}
