package conformance_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/sandproof/sandproof/conformance/framework"
)

// Specs for `warden run`, contract §5. Every spec starts the real
// warden binary with a params file in a temp dir and a CLI that is one of
// the fixtures/cmd programs. Identifiers here start with "runner" because
// other engineers' specs share the package.

// runnerTimeout bounds one runner invocation; a hang fails the spec instead
// of the suite.
const runnerTimeout = 60 * time.Second

// runnerResult is what one `warden run` did.
type runnerResult struct {
	status int
	stdout string
	stderr string
	state  *os.ProcessState
	// maxrss is the runner's peak RSS in bytes, when runnerOpts.measure.
	maxrss int64
}

// runnerOpts tune how the runner is started.
type runnerOpts struct {
	// env is the runner's own environment; nil means an empty one.
	env []string
	// extra become descriptors 3, 4, ... of the runner (nil entries closed).
	extra []*os.File
	// measure runs the runner under the maxrss fixture, which starts it from
	// a small address space: a child's ru_maxrss also counts the high-water
	// mark of the address space it exec'd from, which for a vfork from this
	// test process is the test process's own.
	measure bool
}

// runnerParams writes params as the params file in dir and returns its path.
func runnerParams(dir string, params any) string {
	GinkgoHelper()
	var data []byte
	switch p := params.(type) {
	case string:
		data = []byte(p)
	default:
		var err error
		data, err = json.Marshal(p)
		Expect(err).NotTo(HaveOccurred())
	}
	path := filepath.Join(dir, "params.json")
	Expect(os.WriteFile(path, data, 0o600)).To(Succeed())
	return path
}

// runnerStart starts `warden run --params path` and returns the command and
// a channel that receives once it has exited.
func runnerStart(path string, opts runnerOpts) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer, <-chan struct{}) {
	GinkgoHelper()
	cmd := exec.Command(framework.Bin.Warden, "run", "--params", path)
	if opts.measure {
		cmd = exec.Command(framework.Fixture("maxrss"), "-out", path+".maxrss", framework.Bin.Warden, "run", "--params", path)
	}
	cmd.Env = opts.env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.ExtraFiles = opts.extra
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	Expect(cmd.Start()).To(Succeed())
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		cmd.Wait()
		close(done)
	}()
	DeferCleanup(func() {
		select {
		case <-done:
		default:
			cmd.Process.Kill()
			<-done
		}
	})
	return cmd, &stdout, &stderr, done
}

// runnerRun runs `warden run --params path` to the end.
func runnerRun(path string, opts runnerOpts) runnerResult {
	GinkgoHelper()
	cmd, stdout, stderr, done := runnerStart(path, opts)
	Eventually(done).WithTimeout(runnerTimeout).Should(BeClosed(), "warden run did not exit")
	r := runnerResult{status: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String(), state: cmd.ProcessState}
	if opts.measure {
		Expect(r.status).To(Equal(0), "maxrss failed: %s", r.stderr)
		data, err := os.ReadFile(path + ".maxrss")
		Expect(err).NotTo(HaveOccurred())
		var m struct {
			MaxRSS   int64 `json:"maxrss_bytes"`
			ExitCode int   `json:"exit_code"`
		}
		Expect(json.Unmarshal(data, &m)).To(Succeed())
		r.status, r.maxrss = m.ExitCode, m.MaxRSS
	}
	return r
}

// runnerEvent is one line of an events file, decoded strictly.
type runnerEvent struct {
	TS        string          `json:"ts"`
	Seq       int64           `json:"seq"`
	Event     json.RawMessage `json:"event"`
	Raw       *string         `json:"raw"`
	RawB64    *string         `json:"raw_b64"`
	Truncated bool            `json:"truncated"`
	Bytes     int64           `json:"bytes"`
}

// content returns what the line recorded: "event:<json>", "raw:<text>" or
// "raw_b64:<decoded bytes>". It fails unless exactly one of them is there.
func (e runnerEvent) content() string {
	GinkgoHelper()
	var kinds []string
	var s string
	if e.Event != nil {
		kinds, s = append(kinds, "event"), "event:"+string(e.Event)
	}
	if e.Raw != nil {
		kinds, s = append(kinds, "raw"), "raw:"+*e.Raw
	}
	if e.RawB64 != nil {
		b, err := base64.StdEncoding.DecodeString(*e.RawB64)
		Expect(err).NotTo(HaveOccurred(), "raw_b64 of line %d", e.Seq)
		kinds, s = append(kinds, "raw_b64"), "raw_b64:"+string(b)
	}
	Expect(kinds).To(HaveLen(1), "line %d must have exactly one of event, raw, raw_b64", e.Seq)
	return s
}

// runnerEvents reads an events file: one JSON object per LF-terminated line,
// seq counting from 1, ts in RFC 3339 and never going back.
func runnerEvents(path string) []runnerEvent {
	GinkgoHelper()
	data, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	var events []runnerEvent
	var last time.Time
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		Expect(i).To(BeNumerically(">=", 0), "the last events line has no LF")
		dec := json.NewDecoder(bytes.NewReader(data[:i]))
		dec.DisallowUnknownFields()
		var e runnerEvent
		Expect(dec.Decode(&e)).To(Succeed(), "events line %d", len(events)+1)
		Expect(e.Seq).To(Equal(int64(len(events)+1)), "seq of events line %d", len(events)+1)
		ts, err := time.Parse(time.RFC3339Nano, e.TS)
		Expect(err).NotTo(HaveOccurred(), "ts of events line %d", e.Seq)
		Expect(ts).NotTo(BeTemporally("<", last), "ts of events line %d goes back", e.Seq)
		last = ts
		events = append(events, e)
		data = data[i+1:]
	}
	return events
}

func runnerContents(events []runnerEvent) []string {
	GinkgoHelper()
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.content()
	}
	return out
}

// runnerEmit returns params that run emitfile over the given bytes in events
// mode, and the events file's path.
func runnerEmit(dir string, input []byte, extra map[string]any) (map[string]any, string) {
	GinkgoHelper()
	in := filepath.Join(dir, "input")
	Expect(os.WriteFile(in, input, 0o600)).To(Succeed())
	events := filepath.Join(dir, "events.jsonl")
	p := map[string]any{"argv": []string{framework.Fixture("emitfile"), in}, "mode": "events", "events": events}
	for k, v := range extra {
		p[k] = v
	}
	return p, events
}

// runnerOneLine decodes the single JSON line a fixture printed.
func runnerOneLine(out string, v any) {
	GinkgoHelper()
	Expect(strings.Count(out, "\n")).To(Equal(1), "want exactly one line, got %q", out)
	Expect(json.Unmarshal([]byte(out), v)).To(Succeed())
}

// runnerEnvdump is what the envdump fixture prints.
type runnerEnvdump struct {
	Argv []string `json:"argv"`
	Cwd  string   `json:"cwd"`
	Env  []string `json:"env"`
}

var _ = Describe("warden run", func() {
	var dir string
	BeforeEach(func() {
		dir = GinkgoT().TempDir()
	})

	Describe("in events mode", func() {
		framework.ConformanceIt("5 events mode", "should drop the CR of a CRLF line end and change nothing else", framework.Local, func() {
			// The long line arrives in several reads, so the CR is found both
			// inside one read and after a line built across reads.
			long := strings.Repeat("y", 300_000)
			p, events := runnerEmit(dir, []byte("one\r\n{\"n\":1}\r\nmid\rdle\r\ntwo\r\r\n\r\n"+long+"\r\n"), nil)
			Expect(runnerRun(runnerParams(dir, p), runnerOpts{}).status).To(Equal(0))
			Expect(runnerContents(runnerEvents(events))).To(Equal([]string{
				"raw:one", `event:{"n":1}`, "raw:mid\rdle", "raw:two\r", "raw:", "raw:" + long,
			}))
		})

		framework.ConformanceIt("5 events mode", "should keep a non-JSON line as raw and go on to record the JSON line after it", framework.Local, func() {
			p, events := runnerEmit(dir, []byte("Loading model... {\n{\"type\":\"message_end\",\"n\":[1,2]}\n"), nil)
			Expect(runnerRun(runnerParams(dir, p), runnerOpts{}).status).To(Equal(0))
			got := runnerEvents(events)
			Expect(runnerContents(got)).To(Equal([]string{
				"raw:Loading model... {", `event:{"type":"message_end","n":[1,2]}`,
			}))
			Expect([]int64{got[0].Seq, got[1].Seq}).To(Equal([]int64{1, 2}))
		})

		framework.ConformanceIt("5 events mode", "should record a line that is not valid UTF-8 as raw_b64 holding exactly its bytes", framework.Local, func() {
			line := []byte("caf\xe9 \xff\xfe\x00 {\"a\":\"\xc3\x28\"}")
			p, events := runnerEmit(dir, append(line, '\n'), nil)
			Expect(runnerRun(runnerParams(dir, p), runnerOpts{}).status).To(Equal(0))
			got := runnerEvents(events)
			Expect(got).To(HaveLen(1))
			Expect(got[0].RawB64).NotTo(BeNil())
			b, err := base64.StdEncoding.DecodeString(*got[0].RawB64)
			Expect(err).NotTo(HaveOccurred())
			Expect(b).To(Equal(line))
		})

		framework.ConformanceIt("5 events mode", "should record a final line that has no LF", framework.Local, func() {
			p, events := runnerEmit(dir, []byte("first\n{\"last\":true}"), nil)
			Expect(runnerRun(runnerParams(dir, p), runnerOpts{}).status).To(Equal(0))
			Expect(runnerContents(runnerEvents(events))).To(Equal([]string{"raw:first", `event:{"last":true}`}))
		})

		for _, tc := range []struct {
			name    string
			lineCap int64 // 0: the default
			kept    int
		}{
			{"the default cap", 0, 64 << 20},
			{"a small line_cap", 1 << 20, 1 << 20},
		} {
			framework.ConformanceIt("5 events mode", fmt.Sprintf("should cut a 100 MB line to %s, flag it, and stay under the cap plus 16 MiB of memory", tc.name), framework.Local, func() {
				const size = 100 * 1000 * 1000
				events := filepath.Join(dir, "events.jsonl")
				p := map[string]any{
					"argv":   []string{framework.Fixture("linegen"), "-bytes", strconv.Itoa(size), "-char", "x", "-lines", "1"},
					"mode":   "events",
					"events": events,
				}
				if tc.lineCap != 0 {
					p["line_cap"] = tc.lineCap
				}
				r := runnerRun(runnerParams(dir, p), runnerOpts{measure: true})
				Expect(r.status).To(Equal(0), "stderr: %s", r.stderr)
				// Measured before the events are decoded here, which costs this
				// process hundreds of MiB.
				GinkgoWriter.Printf("peak RSS of warden run: %.1f MiB (cap %d MiB)\n", float64(r.maxrss)/(1<<20), tc.kept>>20)
				Expect(r.maxrss).To(BeNumerically("<", int64(tc.kept)+16<<20))
				got := runnerEvents(events)
				Expect(got).To(HaveLen(1))
				Expect(got[0].Truncated).To(BeTrue())
				Expect(got[0].Bytes).To(Equal(int64(size)))
				Expect(got[0].Raw).NotTo(BeNil())
				Expect(*got[0].Raw).To(HaveLen(tc.kept))
				Expect(strings.Trim(*got[0].Raw, "x")).To(BeEmpty())
			})
		}

		framework.ConformanceIt("5 events mode", "should return when the CLI exits even if a process it left behind holds its stdout open", framework.Local, func() {
			events := filepath.Join(dir, "events.jsonl")
			pidfile := filepath.Join(dir, "leftover.pid")
			p := map[string]any{
				"argv":   []string{framework.Fixture("holdstdout"), "-pidfile", pidfile, "-max", "60s"},
				"mode":   "events",
				"events": events,
			}
			DeferCleanup(func() {
				if b, err := os.ReadFile(pidfile); err == nil {
					if pid, err := strconv.Atoi(string(b)); err == nil {
						syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			})
			r := runnerRun(runnerParams(dir, p), runnerOpts{})
			Expect(r.status).To(Equal(0), "stderr: %s", r.stderr)
			Expect(runnerContents(runnerEvents(events))).To(Equal([]string{`event:{"type":"started"}`}))
			// Positive control: the leftover really was there holding the pipe.
			b, err := os.ReadFile(pidfile)
			Expect(err).NotTo(HaveOccurred())
			pid, err := strconv.Atoi(string(b))
			Expect(err).NotTo(HaveOccurred())
			Expect(syscall.Kill(pid, 0)).To(Succeed(), "the leftover should still be alive")
		})
	})

	Describe("given its params", func() {
		// Each bad params file plants what "runs nothing" checks: the fixture
		// that creates MARKER_FILE (MARKER as argv, MARKER_LINE as one string
		// a lax runner might split) and, where argv cannot carry it, an
		// output file OUT that a runner going on would create. fixed is the
		// smallest correction, which must run and leave those traces: the
		// positive control that the plant would show a run. null can plant
		// nothing, so its spec claims nothing about running.
		for _, tc := range []struct {
			what, params, fixed, field string
		}{
			{"bad JSON", `{"argv": ["MARKER"]`, `{"argv": ["MARKER"]}`, "JSON"},
			{"an unknown field", `{"argv": ["MARKER"], "inherit_envs": ["HOME"]}`, `{"argv": ["MARKER"], "inherit_env": ["HOME"]}`, `"inherit_envs"`},
			{"an empty argv", `{"argv": [], "stdout": "OUT"}`, `{"argv": ["MARKER"], "stdout": "OUT"}`, "argv"},
			{"no argv", `{"cwd": "/", "stdout": "OUT"}`, `{"argv": ["MARKER"], "cwd": "/", "stdout": "OUT"}`, "argv"},
			{"null", `null`, "", "null"},
			{"a wrongly typed field", `{"argv": "MARKER_LINE", "stdout": "OUT"}`, `{"argv": ["MARKER"], "stdout": "OUT"}`, "argv"},
			{"an unknown mode", `{"argv": ["MARKER"], "mode": "stream"}`, `{"argv": ["MARKER"], "mode": "direct"}`, `mode "stream"`},
			{"events mode without an events file", `{"argv": ["MARKER"], "mode": "events"}`, `{"argv": ["MARKER"], "mode": "events", "events": "EVENTS"}`, "events"},
			{"data after the object", `{"argv": ["MARKER"]} {}`, `{"argv": ["MARKER"]}`, "after"},
			{"a zero line_cap", `{"argv": ["MARKER"], "mode": "events", "events": "EVENTS", "line_cap": 0}`, `{"argv": ["MARKER"], "mode": "events", "events": "EVENTS", "line_cap": 1}`, "line_cap"},
		} {
			text := "should refuse " + tc.what + " with 125, naming the field, and run nothing"
			if tc.fixed == "" {
				text = "should refuse " + tc.what + " with 125, naming the field"
			}
			framework.ConformanceIt("5 params", text, framework.Local, func() {
				plant := func(dir, params string) (string, string, string) {
					marker, out := filepath.Join(dir, "ran"), filepath.Join(dir, "out")
					params = strings.ReplaceAll(params, `"MARKER"`, fmt.Sprintf("%q, \"-marker\", %q", framework.Fixture("exitwith"), marker))
					params = strings.ReplaceAll(params, "MARKER_LINE", framework.Fixture("exitwith")+" -marker "+marker)
					params = strings.ReplaceAll(params, `"OUT"`, fmt.Sprintf("%q", out))
					params = strings.ReplaceAll(params, "EVENTS", filepath.Join(dir, "events.jsonl"))
					return params, marker, out
				}
				params, marker, out := plant(dir, tc.params)
				r := runnerRun(runnerParams(dir, params), runnerOpts{})
				Expect(r.status).To(Equal(125))
				Expect(r.stderr).To(HavePrefix("warden: run: "))
				Expect(strings.Count(r.stderr, "\n")).To(Equal(1), "one line: %q", r.stderr)
				Expect(r.stderr).To(ContainSubstring(tc.field))
				Expect(marker).NotTo(BeAnExistingFile())
				Expect(out).NotTo(BeAnExistingFile())
				if tc.fixed == "" {
					return
				}
				fixedDir := GinkgoT().TempDir()
				fixed, fixedMarker, fixedOut := plant(fixedDir, tc.fixed)
				r = runnerRun(runnerParams(fixedDir, fixed), runnerOpts{})
				Expect(r.status).To(Equal(0), "positive control %s: %s", fixed, r.stderr)
				Expect(fixedMarker).To(BeAnExistingFile(), "positive control: the corrected params run the plant")
				if strings.Contains(tc.fixed, `"OUT"`) {
					Expect(fixedOut).To(BeAnExistingFile(), "positive control: the corrected params create the output")
				}
			})
		}

		framework.ConformanceIt("5 params", "should ignore inherited variables named like its params", framework.Local, func() {
			out := filepath.Join(dir, "stdout")
			decoy := filepath.Join(dir, "decoy")
			Expect(os.Mkdir(decoy, 0o700)).To(Succeed())
			decoyEvents := filepath.Join(decoy, "events.jsonl")
			p := map[string]any{"argv": []string{framework.Fixture("envdump"), "real"}, "cwd": dir, "stdout": out}
			env := []string{
				"ARGV=" + framework.Fixture("exitwith"), "MODE=events", "EVENTS=" + decoyEvents,
				"CWD=" + decoy, "STDOUT=" + filepath.Join(decoy, "out"), "STDIN=/etc/passwd",
				"ENV=LEAK=1", "INHERIT_ENV=SECRET", "PATH_PREFIX=" + decoy, "LINE_CAP=1", "PARAMS=" + filepath.Join(decoy, "p.json"),
				"WARDEN_RUN_MODE=events", "WARDEN_RUN_EVENTS=" + decoyEvents, "WARDEN_RUN_ARGV=/bin/false",
				"WARDEN_RUN_CWD=" + decoy, "WARDEN_RUN_STDOUT=" + filepath.Join(decoy, "out"), "WARDEN_EVENTS=" + decoyEvents,
				"WARDEN_MODE=events", "WARDEN_PARAMS=" + filepath.Join(decoy, "p.json"), "SECRET=canary-4f1d",
			}
			r := runnerRun(runnerParams(dir, p), runnerOpts{env: env})
			Expect(r.status).To(Equal(0), "stderr: %s", r.stderr)
			data, err := os.ReadFile(out)
			Expect(err).NotTo(HaveOccurred())
			var got runnerEnvdump
			runnerOneLine(string(data), &got)
			Expect(got.Argv[1:]).To(Equal([]string{"real"}))
			Expect(got.Cwd).To(Equal(dir))
			Expect(got.Env).To(Equal([]string{"PATH=" + "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}))
			entries, err := os.ReadDir(decoy)
			Expect(err).NotTo(HaveOccurred())
			Expect(entries).To(BeEmpty())
		})

		framework.ConformanceIt("5 params", "should pass WARDEN_LAUNCH first even when env and inherit_env leave it out", framework.Local, func() {
			out := filepath.Join(dir, "stdout")
			p := map[string]any{
				"argv":        []string{framework.Fixture("envdump")},
				"env":         map[string]string{"A_FIRST": "1", "ZED": "2"},
				"inherit_env": []string{"HOME"},
				"stdout":      out,
			}
			env := []string{"HOME=/home/agent", "OTHER=no", "WARDEN_LAUNCH=outer:inner"}
			r := runnerRun(runnerParams(dir, p), runnerOpts{env: env})
			Expect(r.status).To(Equal(0), "stderr: %s", r.stderr)
			data, err := os.ReadFile(out)
			Expect(err).NotTo(HaveOccurred())
			var got runnerEnvdump
			runnerOneLine(string(data), &got)
			Expect(got.Env).NotTo(BeEmpty())
			Expect(got.Env[0]).To(Equal("WARDEN_LAUNCH=outer:inner"))
			Expect(got.Env).To(ConsistOf("WARDEN_LAUNCH=outer:inner", "HOME=/home/agent", "A_FIRST=1", "ZED=2",
				"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"))
		})

		framework.ConformanceIt("5 params", "should find a bare argv[0] through path_prefix and put the prefix before PATH", framework.Local, func() {
			out := filepath.Join(dir, "stdout")
			p := map[string]any{
				"argv":        []string{"envdump", "x"},
				"path_prefix": []string{filepath.Dir(framework.Fixture("envdump"))},
				"env":         map[string]string{"PATH": "/opt/bin:/usr/bin"},
				"stdout":      out,
			}
			r := runnerRun(runnerParams(dir, p), runnerOpts{env: []string{"PATH=/usr/bin"}})
			Expect(r.status).To(Equal(0), "stderr: %s", r.stderr)
			data, err := os.ReadFile(out)
			Expect(err).NotTo(HaveOccurred())
			var got runnerEnvdump
			runnerOneLine(string(data), &got)
			Expect(got.Env).To(ContainElement("PATH=" + filepath.Dir(framework.Fixture("envdump")) + ":/opt/bin:/usr/bin"))
		})
	})

	Describe("when the CLI cannot run", func() {
		framework.ConformanceIt("5 exit statuses", "should exit 127 when the CLI is not found", framework.Local, func() {
			for _, argv0 := range []string{filepath.Join(dir, "no-such-cli"), "no-such-cli-4f1d"} {
				r := runnerRun(runnerParams(dir, map[string]any{"argv": []string{argv0}}), runnerOpts{})
				Expect(r.status).To(Equal(127), "argv[0] %q", argv0)
				Expect(r.stderr).To(And(HavePrefix("warden: run: "), ContainSubstring(strconv.Quote(argv0))))
			}
		})

		framework.ConformanceIt("5 exit statuses", "should exit 126 when the CLI exists but cannot be executed", framework.Local, func() {
			notExec := filepath.Join(dir, "cli")
			Expect(os.WriteFile(notExec, []byte("#!/bin/sh\nexit 0\n"), 0o644)).To(Succeed())
			for _, argv0 := range []string{notExec, dir} {
				r := runnerRun(runnerParams(dir, map[string]any{"argv": []string{argv0}}), runnerOpts{})
				Expect(r.status).To(Equal(126), "argv[0] %q", argv0)
				Expect(r.stderr).To(HavePrefix("warden: run: "))
			}
			r := runnerRun(runnerParams(dir, map[string]any{"argv": []string{"cli"}, "path_prefix": []string{dir}}), runnerOpts{})
			Expect(r.status).To(Equal(126), "a bare name found but not executable")
		})

		framework.ConformanceIt("5 exit statuses", "should exit 125 for a cwd it cannot enter, and run nothing", framework.Local, func() {
			marker := filepath.Join(dir, "ran")
			file := filepath.Join(dir, "a-file")
			Expect(os.WriteFile(file, nil, 0o600)).To(Succeed())
			for _, cwd := range []string{filepath.Join(dir, "missing"), file} {
				p := map[string]any{"argv": []string{framework.Fixture("exitwith"), "-marker", marker}, "cwd": cwd}
				r := runnerRun(runnerParams(dir, p), runnerOpts{})
				Expect(r.status).To(Equal(125), "cwd %q", cwd)
				Expect(r.stderr).To(And(HavePrefix("warden: run: "), ContainSubstring("cwd "+strconv.Quote(cwd))))
				Expect(marker).NotTo(BeAnExistingFile())
			}
		})

		for _, tc := range []struct{ field, mode string }{
			{"stdout", "direct"}, {"stderr", "direct"}, {"stderr", "events"}, {"events", "events"}, {"stdin", "direct"},
		} {
			framework.ConformanceIt("5 exit statuses", fmt.Sprintf("should exit 125 when %s cannot be opened in %s mode, and never run the CLI", tc.field, tc.mode), framework.Local, func() {
				marker := filepath.Join(dir, "ran")
				bad := filepath.Join(dir, "no-such-dir", "file")
				p := map[string]any{"argv": []string{framework.Fixture("exitwith"), "-marker", marker}, "mode": tc.mode}
				if tc.mode == "events" {
					p["events"] = filepath.Join(dir, "events.jsonl")
				}
				p[tc.field] = bad
				// Positive control: with a good path the same params run the CLI.
				good := filepath.Join(dir, tc.field)
				if tc.field == "stdin" {
					Expect(os.WriteFile(good, nil, 0o600)).To(Succeed())
				}
				p[tc.field] = good
				Expect(runnerRun(runnerParams(dir, p), runnerOpts{}).status).To(Equal(0))
				Expect(marker).To(BeAnExistingFile())
				Expect(os.Remove(marker)).To(Succeed())

				p[tc.field] = bad
				r := runnerRun(runnerParams(dir, p), runnerOpts{})
				Expect(r.status).To(Equal(125))
				Expect(r.stderr).To(And(HavePrefix("warden: run: "), ContainSubstring(tc.field+" "+strconv.Quote(bad))))
				Expect(marker).NotTo(BeAnExistingFile())
			})
		}
	})

	Describe("when the CLI ends", func() {
		for _, tc := range []struct {
			args []string
			want int
		}{
			{[]string{"-code", "0"}, 0},
			{[]string{"-code", "3"}, 3},
			{[]string{"-code", "255"}, 255},
			{[]string{"-signal", "KILL"}, 128 + 9},
			{[]string{"-signal", "TERM"}, 128 + 15},
			{[]string{"-signal", "HUP"}, 128 + 1},
		} {
			framework.ConformanceIt("5 exit statuses", fmt.Sprintf("should exit %d when the CLI runs exitwith %s", tc.want, strings.Join(tc.args, " ")), framework.Local, func() {
				for _, mode := range []string{"direct", "events"} {
					p := map[string]any{"argv": append([]string{framework.Fixture("exitwith")}, tc.args...), "mode": mode}
					if mode == "events" {
						p["events"] = filepath.Join(dir, "events.jsonl")
					}
					r := runnerRun(runnerParams(dir, p), runnerOpts{})
					Expect(r.status).To(Equal(tc.want), "%s mode; stderr: %s", mode, r.stderr)
					Expect(r.state.Exited()).To(BeTrue(), "the runner exits; it does not die of the signal itself")
				}
			})
		}
	})

	Describe("given descriptors it inherited without close-on-exec", func() {
		for _, mode := range []string{"direct", "events"} {
			framework.ConformanceIt("5 descriptors", fmt.Sprintf("should pass the CLI only 0, 1 and 2 in %s mode", mode), framework.Local, func() {
				canary, err := os.Create(filepath.Join(dir, "inherited-canary"))
				Expect(err).NotTo(HaveOccurred())
				DeferCleanup(canary.Close)
				extra := []*os.File{nil, nil, canary} // the canary is fd 5
				// inherited maps the descriptors fdlist got across its exec (those
				// without close-on-exec) to what they point to; the ones the Go
				// runtime opened in the fixture itself are close-on-exec.
				inherited := func(out string) map[int]string {
					GinkgoHelper()
					var got struct {
						FDs []struct {
							FD      int    `json:"fd"`
							Target  string `json:"target"`
							Cloexec bool   `json:"cloexec"`
						} `json:"fds"`
					}
					runnerOneLine(out, &got)
					m := map[int]string{}
					for _, e := range got.FDs {
						if !e.Cloexec {
							m[e.FD] = e.Target
						}
					}
					return m
				}

				// Positive control: started directly, fdlist sees fd 5.
				direct := exec.Command(framework.Fixture("fdlist"))
				direct.ExtraFiles = extra
				out, err := direct.Output()
				Expect(err).NotTo(HaveOccurred())
				Expect(inherited(string(out))).To(HaveKeyWithValue(5, canary.Name()))

				p := map[string]any{"argv": []string{framework.Fixture("fdlist")}, "mode": mode}
				stdout := filepath.Join(dir, "stdout")
				events := filepath.Join(dir, "events.jsonl")
				if mode == "events" {
					p["events"] = events
				} else {
					p["stdout"] = stdout
				}
				r := runnerRun(runnerParams(dir, p), runnerOpts{extra: extra})
				Expect(r.status).To(Equal(0), "stderr: %s", r.stderr)
				var line string
				if mode == "events" {
					got := runnerEvents(events)
					Expect(got).To(HaveLen(1))
					Expect(got[0].Event).NotTo(BeNil())
					line = string(got[0].Event) + "\n"
				} else {
					b, err := os.ReadFile(stdout)
					Expect(err).NotTo(HaveOccurred())
					line = string(b)
				}
				got := inherited(line)
				Expect(got).To(HaveLen(3), "descriptors the CLI inherited: %v", got)
				Expect(got).To(And(HaveKey(0), HaveKey(1), HaveKey(2)))
			})
		}
	})

	Describe("sent a signal", func() {
		for _, tc := range []struct {
			sig      syscall.Signal
			name     string
			onSignal string
			want     int
		}{
			{syscall.SIGTERM, "TERM", "record", 0},
			{syscall.SIGTERM, "TERM", "die", 128 + 15},
			{syscall.SIGINT, "INT", "record", 0},
			{syscall.SIGINT, "INT", "die", 128 + 2},
		} {
			what := "exits 0 on it"
			if tc.onSignal == "die" {
				what = "dies of it"
			}
			framework.ConformanceIt("5 signals", fmt.Sprintf("should forward %s to the CLI and exit %d when the CLI %s", tc.name, tc.want, what), framework.Local, func() {
				ready := filepath.Join(dir, "ready")
				record := filepath.Join(dir, "record")
				p := map[string]any{
					"argv": []string{framework.Fixture("sigwait"), "-ready", ready, "-record", record, "-on-signal", tc.onSignal, "-max", "60s"},
					"mode": "events", "events": filepath.Join(dir, "events.jsonl"),
				}
				cmd, _, stderr, done := runnerStart(runnerParams(dir, p), runnerOpts{})
				var pid int
				Eventually(func() error {
					b, err := os.ReadFile(ready)
					if err == nil {
						pid, err = strconv.Atoi(string(b))
					}
					return err
				}).WithTimeout(runnerTimeout).Should(Succeed(), "the CLI never got ready")
				DeferCleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
				Expect(pid).NotTo(Equal(cmd.Process.Pid), "the CLI is a child, not the runner")

				Expect(cmd.Process.Signal(tc.sig)).To(Succeed())
				Eventually(done).WithTimeout(runnerTimeout).Should(BeClosed(), "warden run did not exit after %s", tc.name)
				Expect(cmd.ProcessState.ExitCode()).To(Equal(tc.want), "stderr: %s", stderr)
				if tc.onSignal == "record" {
					Expect(os.ReadFile(record)).To(Equal([]byte(tc.name + "\n")))
				} else {
					Expect(record).NotTo(BeAnExistingFile())
				}
			})
		}
	})
})
