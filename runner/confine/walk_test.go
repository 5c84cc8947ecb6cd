package confine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandproof/sandproof/runner/confine"
)

// walked is what a walk of dir (within lim) met: each entry's path and
// type ("d" a directory descended into, "l" a link, "f" anything else).
func walked(t *testing.T, ctx context.Context, dir string, lim confine.WalkLimits) ([]string, error) {
	t.Helper()
	var out []string
	err := confine.Walk(ctx, openRoot(t, dir), lim, func(e *confine.Entry) error {
		kind := "f"
		switch {
		case e.IsDir():
			kind = "d"
		case e.Stat.Mode&unix.S_IFMT == unix.S_IFLNK:
			kind = "l"
		}
		out = append(out, kind+" "+e.Rel)
		return nil
	})
	slices.Sort(out)
	return out, err
}

// A directory swapped for a link to a canary between the walk's look at
// it and its open is met as the link it is: passed as a link, never
// descended into, so no name of the canary is read. Links already there
// (to a directory out of the tree, and one that stays in it) are links
// too. The same swap at the same moment leads a walk by name into the
// canary (the positive control, rm by name's shape: lstat, then open by
// path).
func TestWalkMeetsASwappedDirectoryAsALink(t *testing.T) {
	b := base(t)
	top := filepath.Join(b, "r")

	tree(t, filepath.Join(top, "sub"))
	can := canary(t, filepath.Join(b, "canary-byname"))
	swap, swapped := swapOnce(t, filepath.Join(top, "sub"), filepath.Join(top, "sub"), filepath.Join(b, "moved-byname"), can)
	var byName []string
	byPathRm(top, func(p string) {
		swap(p)
		if names, err := readNames(p); err == nil {
			byName = append(byName, names...)
		}
	})
	if !*swapped || !slices.Contains(byName, "marker") {
		t.Fatalf("positive control: a walk by name with the swap read no canary name (swapped %t): %q", *swapped, byName)
	}
	os.RemoveAll(top)

	tree(t, filepath.Join(top, "sub"))
	for link, target := range map[string]string{"out": can, "in": "sub"} {
		if err := os.Symlink(target, filepath.Join(top, link)); err != nil {
			t.Fatal(err)
		}
	}
	can = canary(t, filepath.Join(b, "canary"))
	f, swapped := swapOnce(t, "sub", filepath.Join(top, "sub"), filepath.Join(b, "moved"), can)
	hook(t, f)
	got, err := walked(t, context.Background(), top, confine.WalkLimits{})
	if err != nil {
		t.Fatalf("walk: %v", err)
	}
	if !*swapped {
		t.Fatal("the hook never ran: the swap was not made")
	}
	if want := []string{"l in", "l out", "l sub"}; !slices.Equal(got, want) {
		t.Errorf("walked %q, want %q (the swapped directory met as a link, nothing below it read)", got, want)
	}
}

// A walk reads every entry of a tree, a directory before what it holds,
// each with the directory's descriptor and its own for a directory.
func TestWalkReadsTheTree(t *testing.T) {
	top := filepath.Join(base(t), "r")
	tree(t, top)
	var order []string
	err := confine.Walk(context.Background(), openRoot(t, top), confine.WalkLimits{}, func(e *confine.Entry) error {
		order = append(order, e.Rel)
		var st unix.Stat_t
		if err := unix.Fstatat(e.Dir, e.Name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Ino != e.Stat.Ino {
			return fmt.Errorf("%s: not in its Dir as Name: %v", e.Rel, err)
		}
		if e.IsDir() {
			if err := unix.Fstat(e.FD, &st); err != nil || st.Ino != e.Stat.Ino {
				return fmt.Errorf("%s: FD is not the directory: %v", e.Rel, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got := slices.Sorted(slices.Values(order))
	want := slices.Sorted(slices.Values(canaryNames))
	if !slices.Equal(got, want) {
		t.Fatalf("walked %q, want %q", got, want)
	}
	if slices.Index(order, "d1") > slices.Index(order, "d1/f1") || slices.Index(order, "d1/d2") > slices.Index(order, "d1/d2/f3") {
		t.Errorf("a directory after what it holds: %q", order)
	}
}

// A walk past its bounds ends with an error naming the bound: entries
// (the caller's cap, not the default) and a path's length; within them the
// same tree is read whole.
func TestWalkIsBounded(t *testing.T) {
	top := filepath.Join(base(t), "r")
	tree(t, top)
	long := filepath.Join(top, strings.Repeat("n", 200), strings.Repeat("n", 200))
	if err := os.MkdirAll(long, 0o755); err != nil {
		t.Fatal(err)
	}
	all, err := walked(t, context.Background(), top, confine.WalkLimits{})
	if err != nil || len(all) != len(canaryNames)+2 {
		t.Fatalf("positive control: walked %d entries (%v), want %d", len(all), err, len(canaryNames)+2)
	}
	if _, err := walked(t, context.Background(), top, confine.WalkLimits{Entries: 4}); !errors.Is(err, confine.ErrTooManyEntries) {
		t.Errorf("a walk of %d entries, at most 4: %v; want ErrTooManyEntries", len(all), err)
	}
	if _, err := walked(t, context.Background(), top, confine.WalkLimits{PathBytes: 300}); !errors.Is(err, confine.ErrPathTooLong) {
		t.Errorf("a walk meeting a 401-byte path, at most 300: %v; want ErrPathTooLong", err)
	}
}

// A walk whose context ends reads nothing more: the directory it was
// opening when it ended is the last entry read, and its error is the
// context's.
func TestWalkStopsWithItsContext(t *testing.T) {
	top := filepath.Join(base(t), "r")
	for i := range 20 {
		if err := os.MkdirAll(filepath.Join(top, fmt.Sprintf("d%02d/e", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	before, after := 0, 0
	hook(t, func(string) {
		if ctx.Err() != nil {
			after++
		} else if before++; before == 3 {
			cancel()
		}
	})
	got, err := walked(t, ctx, top, confine.WalkLimits{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("walk after its context ended: %v, want context.Canceled", err)
	}
	if before != 3 || after != 0 || len(got) != 3 {
		t.Errorf("opened %d directories before the cancel and %d after, read %d entries; want 3, none and 3", before, after, len(got))
	}
}
