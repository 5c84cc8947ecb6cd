package certify

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// treeFormat opens every treeHash listing: a digest of this encoding is
// never one of another (the one before it wrote names raw, line by line).
const treeFormat = "sandproof.tree/v2\n"

// treeHash digests a tree: for every entry in path order, its kind,
// relative path, permission bits (setuid, setgid and sticky included), and the sha256 of a file's content or a
// link's target (links are never followed), each field written by
// treeField (length-prefixed). The listing is injective whatever bytes a
// name holds: the digest names the read-only volume a runtime (or the
// owner's tree) is mounted from, shared by every later run on the engine,
// and a name holding a newline once glued two entries into one, so a
// hostile package's tree hashed as an honest adapter's and was run as it
// (issue 35). Paths in exclude (relative to root) are left out.
func treeHash(root string, exclude ...string) (string, int, error) {
	h := sha256.New()
	io.WriteString(h, treeFormat)
	files := 0
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if slices.Contains(exclude, rel) {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		kind, detail, err := treeEntry(p, info.Mode())
		if err != nil {
			return err
		}
		if kind == "f" {
			files++
		}
		for _, f := range []string{kind, rel, fmt.Sprintf("%o", modeBits(info.Mode())), detail} {
			treeField(h, f)
		}
		return nil
	})
	return hex.EncodeToString(h.Sum(nil)), files, err
}

// modeBits are the permission bits of mode with the setuid, setgid and
// sticky bits, as a volume's fill keeps them (a tar header's mode): two
// trees that differ only there would otherwise share a volume.
func modeBits(mode fs.FileMode) uint32 {
	bits := uint32(mode.Perm())
	for flag, bit := range map[fs.FileMode]uint32{fs.ModeSetuid: 0o4000, fs.ModeSetgid: 0o2000, fs.ModeSticky: 0o1000} {
		if mode&flag != 0 {
			bits |= bit
		}
	}
	return bits
}

// treeField writes one field of a listing as its length, a colon, its
// bytes and a comma (a netstring): no field can end early or run into the
// next, whatever it holds.
func treeField(w io.Writer, s string) {
	fmt.Fprintf(w, "%d:%s,", len(s), s)
}

// treeEntry is the kind of the entry at p ("l", "d", "f", or "o" for
// anything else) and what is hashed of it beside its name and mode: a
// link's target, a file's sha256, another entry's type.
func treeEntry(p string, mode fs.FileMode) (kind, detail string, err error) {
	switch {
	case mode&fs.ModeSymlink != 0:
		t, err := os.Readlink(p)
		return "l", t, err
	case mode.IsDir():
		return "d", "", nil
	case mode.IsRegular():
		f, err := os.Open(p)
		if err != nil {
			return "", "", err
		}
		defer f.Close()
		fh := sha256.New()
		if _, err := io.Copy(fh, f); err != nil {
			return "", "", err
		}
		return "f", hex.EncodeToString(fh.Sum(nil)), nil
	default:
		return "o", mode.Type().String(), nil
	}
}
