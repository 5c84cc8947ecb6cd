package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
)

// TestBuildsStatic: the probe must run in images with no libc at all, so
// both release architectures must build with CGO_ENABLED=0 into ELF files
// with no interpreter and no shared-library dependency.
func TestBuildsStatic(t *testing.T) {
	testenv.Long(t, "builds the binary twice")
	for _, arch := range []struct {
		goarch  string
		machine elf.Machine
	}{{"amd64", elf.EM_X86_64}, {"arm64", elf.EM_AARCH64}} {
		t.Run(arch.goarch, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "probe")
			cmd := exec.Command("go", "build", "-o", out, ".")
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch.goarch)
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("go build for %s: %v\n%s", arch.goarch, err, b)
			}
			f, err := elf.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Machine != arch.machine {
				t.Errorf("machine = %v, want %v", f.Machine, arch.machine)
			}
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP {
					t.Errorf("%s build has an ELF interpreter: not static", arch.goarch)
				}
			}
			if libs, err := f.ImportedLibraries(); err != nil || len(libs) != 0 {
				t.Errorf("%s build needs shared libraries %q (%v)", arch.goarch, libs, err)
			}
		})
	}
}
