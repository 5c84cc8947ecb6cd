package certify

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// lineListing is the digest main's treeHash took (issue 35, round 4): one
// line per entry, fields joined by spaces, the name raw. The test's
// positive control: each forged tree below collides with its honest one
// under it.
func lineListing(t *testing.T, root string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		info, err := e.Info()
		if err != nil {
			return err
		}
		switch m := info.Mode(); {
		case m.IsDir():
			fmt.Fprintf(h, "d %s %o\n", rel, m.Perm())
		case m&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			fmt.Fprintf(h, "l %s %s\n", rel, target)
		default:
			b, _ := os.ReadFile(p)
			fmt.Fprintf(h, "f %s %o %x\n", rel, m.Perm(), sha256.Sum256(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// The runtime's read-only volume is named by treeHash and shared by every
// later run on the engine. Main wrote names raw into a line listing, and
// an artifact's name may hold a newline: a hostile package whose one file
// is named "a 644 <sha256 of a>\nf b" and holds b's bytes hashed as the
// honest tree {a, b} (the red team's pair, rt-rt-ac), and its content ran
// as the honest adapter. The listing is length-prefixed now: the red
// team's pair, and the same forgery glued with each separator a raw
// listing might use, hash apart; so do a link and a file, and a link
// whose target holds a second entry.
func TestTreeHashIsInjective(t *testing.T) {
	honestA, honestB := "honest code\n", "data\n"
	ha := fmt.Sprintf("%x", sha256.Sum256([]byte(honestA)))
	hb := fmt.Sprintf("%x", sha256.Sum256([]byte(honestB)))
	type entry struct{ name, content, link string }
	tree := func(es ...entry) string {
		dir := t.TempDir()
		for _, e := range es {
			p := filepath.Join(dir, e.name)
			if e.link != "" {
				if err := os.Symlink(e.link, p); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err := os.WriteFile(p, []byte(e.content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	honest := tree(entry{name: "a", content: honestA}, entry{name: "b", content: honestB})
	linked := tree(entry{name: "l", link: "x"}, entry{name: "m", content: honestB})
	type pair struct {
		name           string
		honest, forged string
		collidesOnMain bool
	}
	pairs := []pair{
		{"the red team's newline", honest, tree(entry{name: "a 644 " + ha + "\nf b", content: honestB}), true},
		{"a link whose target holds the next entry", linked, tree(entry{name: "l", link: "x\nf m 644 " + hb}), true},
	}
	for _, sep := range []string{" ", ",", ":", "\t", "|", "\n"} {
		name := strings.Join([]string{"a", "644", ha, "f", "b"}, sep)
		pairs = append(pairs, pair{fmt.Sprintf("fields glued with %q", sep), honest, tree(entry{name: name, content: honestB}), false})
	}
	hs, hn, err := treeHash(honest)
	if err != nil {
		t.Fatal(err)
	}
	if hn != 2 {
		t.Fatalf("honest tree: %d files, want 2", hn)
	}
	for _, p := range pairs {
		if p.collidesOnMain && lineListing(t, p.forged) != lineListing(t, p.honest) {
			t.Fatalf("%s: positive control: the forged tree does not collide under main's line listing", p.name)
		}
		want, _, err := treeHash(p.honest)
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		fs, _, err := treeHash(p.forged)
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		if fs == want {
			t.Errorf("%s: the forged tree hashes as the honest one (%s): its volume would be runtime-%s", p.name, fs, fs[:32])
		}
	}
	// The same tree hashes the same (the volume is shared, by content).
	again, _, _ := treeHash(tree(entry{name: "a", content: honestA}, entry{name: "b", content: honestB}))
	if again != hs {
		t.Errorf("the same tree hashed %s then %s", hs, again)
	}
	// Every field counts: a mode, a content, a link's target.
	if err := os.Chmod(filepath.Join(honest, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	m, _, _ := treeHash(honest)
	if m == hs {
		t.Error("a mode changed, the digest did not")
	}
	if err := os.Chmod(filepath.Join(honest, "a"), 0o755|fs.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(honest, "a")); err != nil || fi.Mode()&fs.ModeSetgid == 0 {
		t.Fatalf("positive control: the setgid bit was not set (%v)", err)
	}
	if g, _, _ := treeHash(honest); g == m {
		t.Error("the setgid bit set (a volume's fill keeps it), the digest did not change")
	}
}
