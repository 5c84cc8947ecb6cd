package adapter_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/runner/host/adapter"
)

// fuzzNameRe is the manifest name rule of docs/adapters.md, kept here so the
// fuzz target checks the documented rule, not the parser's own regexp.
var fuzzNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// FuzzParse: any manifest bytes are accepted or refused with ErrInvalid,
// never a panic; what is accepted keeps the rules a session relies on: a
// valid name, a launch argv that is not empty and whose templates expand, a
// launch deadline in (0, 31536000], no WARDEN_LAUNCH in any env, private state
// only under {session_dir} or {home}, runtime files inside the runtime dir,
// and the hash of exactly the bytes read.
func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte("name: x\nversion: \"1\"\nlaunch:\n  argv: [\"x) S 1 1 $(>p)\", \"{prompt}\"]\n  deadline: 60\n  env: {A: \"$((1+1))\"}\n"))
	f.Add([]byte("name: x\r\nversion: \"1\"\r\nlaunch:\r\n  argv: [a]\r\n  deadline: 0x10\r\n"))
	f.Add([]byte("name: x\nversion: \"1\"\nlaunch:\n  argv: [a]\n  deadline: \"\"\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Add([]byte("name: \xff\xfe\nversion: 1\nlaunch: {argv: [a], deadline: 1}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := adapter.Parse("fuzz.yaml", "/fuzz", data)
		if err != nil {
			if !errors.Is(err, adapter.ErrInvalid) {
				t.Fatalf("refused without ErrInvalid: %v", err)
			}
			return
		}
		sum := sha256.Sum256(data)
		if m.SHA256 != hex.EncodeToString(sum[:]) {
			t.Fatalf("sha256 %q is not the hash of the input", m.SHA256)
		}
		if !fuzzNameRe.MatchString(m.Name) {
			t.Fatalf("accepted name %q", m.Name)
		}
		if len(m.Launch.Argv) == 0 {
			t.Fatalf("accepted an empty launch argv from %q", data)
		}
		if m.Launch.Deadline <= 0 || m.Launch.Deadline > 31536000 {
			t.Fatalf("accepted launch deadline %v from %q", m.Launch.Deadline, data)
		}
		steps := []*adapter.Step{&m.Launch.Step}
		if m.Install != nil {
			steps = append(steps, m.Install)
			if m.Install.Deadline <= 0 || m.Install.Deadline > 31536000 {
				t.Fatalf("accepted install deadline %v from %q", m.Install.Deadline, data)
			}
		}
		for _, s := range steps {
			for _, a := range s.Argv {
				if err := adapter.CheckTemplate(a); err != nil {
					t.Fatalf("accepted argv %q: %v", a, err)
				}
			}
			if _, ok := s.Env["WARDEN_LAUNCH"]; ok {
				t.Fatalf("accepted WARDEN_LAUNCH in an env from %q", data)
			}
		}
		for k, v := range m.State.Env {
			if !under(v, "{session_dir}", "{home}") {
				t.Fatalf("accepted state.env.%s = %q outside the session", k, v)
			}
		}
		for _, rf := range m.Runtime.Files {
			if strings.HasPrefix(rf.Dst, "/") || rf.Dst == ".." || strings.HasPrefix(rf.Dst, "../") {
				t.Fatalf("accepted runtime file dst %q outside the runtime dir", rf.Dst)
			}
		}
	})
}

// under reports whether template t names a root or a path below one, with
// no ".." component.
func under(t string, roots ...string) bool {
	for _, r := range roots {
		if t == r || strings.HasPrefix(t, r+"/") {
			for _, part := range strings.Split(t, "/") {
				if part == ".." {
					return false
				}
			}
			return true
		}
	}
	return false
}
