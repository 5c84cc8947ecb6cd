package harness

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
)

// runParams runs `warden run` in this process on params holding argv.
func runParams(t *testing.T, argv ...string) (int, string) {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "params.json")
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = `"` + a + `"`
	}
	if err := os.WriteFile(p, []byte(`{"argv":[`+strings.Join(q, ",")+`],"stdout":"`+filepath.Join(dir, "out")+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	return Main([]string{"--params", p}, &stdout, &stderr), stderr.String()
}

// A file that exists but whose interpreter does not gets 126 and an error
// naming the missing interpreter, not a bare "no such file or directory"
// about a file that is there.
func TestExecNamesTheMissingInterpreter(t *testing.T) {
	dir := t.TempDir()

	script := filepath.Join(dir, "script")
	if err := os.WriteFile(script, []byte("#!/nonexistent/bin/interp -x\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	status, stderr := runParams(t, script)
	if status != ExitCannotExec || !strings.Contains(stderr, `#! interpreter "/nonexistent/bin/interp" is missing`) {
		t.Errorf("script with a missing #! interpreter: status %d, stderr %q", status, stderr)
	}

	// A dynamically linked binary of this host with its loader's path
	// rewritten (same length) to one that does not exist.
	sh, err := exec.LookPath("sh")
	if err != nil {
		testenv.Missing(t, "sh on PATH", "install Debian's dash")
	}
	sh, _ = filepath.EvalSymlinks(sh)
	data, err := os.ReadFile(sh)
	if err != nil {
		t.Fatal(err)
	}
	ef, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		testenv.Missing(t, fmt.Sprintf("a dynamically linked ELF sh (%s is not ELF: %v)", sh, err), "run the tests on Debian, whose /bin/sh is dash")
	}
	var interp *elf.Prog
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			interp = p
		}
	}
	if interp == nil {
		testenv.Missing(t, fmt.Sprintf("a dynamically linked sh (%s is static: no loader to rewrite)", sh), "run the tests on Debian, whose /bin/sh is dash")
	}
	// Positive control: the unmodified copy runs.
	bin := filepath.Join(dir, "bin")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if status, stderr := runParams(t, bin, "-c", "exit 0"); status != 0 {
		t.Fatalf("unmodified copy of %s: status %d, stderr %q", sh, status, stderr)
	}
	missing := "/nonexistent/ld.so"
	if uint64(len(missing)) >= interp.Filesz {
		t.Fatalf("loader path of %s too short to rewrite", sh)
	}
	patch := make([]byte, interp.Filesz)
	copy(patch, missing)
	copy(data[interp.Off:], patch)
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	status, stderr = runParams(t, bin, "-c", "exit 0")
	if status != ExitCannotExec || !strings.Contains(stderr, `ELF interpreter "/nonexistent/ld.so" is missing`) || !strings.Contains(stderr, "requires") {
		t.Errorf("binary with a missing loader: status %d, stderr %q", status, stderr)
	}
}
