package proc

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// PIDs parses the directory records itself: it must list exactly the
// numeric names, skipping the ones that only look like pids.
func TestPIDsListsOnlyNumericEntries(t *testing.T) {
	root := t.TempDir()
	for _, name := range []string{"1", "42", "4194304", "self", "12a", "0", "007", "99999999999", "sys", "7 "} {
		if err := os.Mkdir(filepath.Join(root, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Enough entries that the listing takes more than one getdents call
	// into a small buffer would, and names of every length.
	want := []int{1, 42, 4194304}
	for i := 100; i < 3000; i++ {
		want = append(want, i)
		if err := os.Mkdir(filepath.Join(root, itoa(i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got, err := NewFS(root).PIDs()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("PIDs() listed %d entries, want %d (first %v)", len(got), len(want), got[:min(5, len(got))])
	}
}

// On the kernel's /proc, this process and its parent are listed.
func TestPIDsOnRealProcListsSelf(t *testing.T) {
	got, err := NewFS("").PIDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{os.Getpid(), os.Getppid()} {
		if !slices.Contains(got, pid) {
			t.Fatalf("PIDs() of /proc (%d entries) lacks pid %d", len(got), pid)
		}
	}
}

func itoa(i int) string {
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}
