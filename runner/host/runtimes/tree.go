package runtimes

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sandproof/sandproof/runner/host/artifact"
	"github.com/sandproof/sandproof/runner/host/hostfile"
)

// TreeSum hashes the tree at dir: for every entry, in byte order of its
// slash-separated path, a line "KIND PATH DETAIL" where KIND is d, f, x
// (an executable file), or l, and DETAIL is the sha256 of a file's content
// or a link's target. Owners, times and permission bits other than the
// executable bit are left out, so the sum does not depend on the umask or
// on when the tree was made. Paths in exclude (relative, slash-separated)
// are skipped. It also returns the number of regular files and their bytes.
//
// Every line reads one way only (treeLine), so no two trees share a sum.
// A path holding a newline, or an entry that is none of the four kinds,
// is refused (artifact.ErrRefused): it is the package's own content.
func TreeSum(dir string, exclude []string) (sum string, files int, size int64, err error) {
	type entry struct{ rel, line string }
	var entries []entry
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, werr error) error {
		if werr != nil {
			return werr
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if slices.Contains(exclude, rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.ContainsAny(rel, "\n") {
			return fmt.Errorf("%w: hash tree: path with a newline %q", artifact.ErrRefused, rel)
		}
		switch t := d.Type(); {
		case t.IsDir():
			entries = append(entries, entry{rel, treeLine("d", rel, "")})
		case t&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			entries = append(entries, entry{rel, treeLine("l", rel, target)})
		case t.IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			h, n, err := hostfile.SHA256File(p)
			if err != nil {
				return err
			}
			kind := "f"
			if fi.Mode().Perm()&0o111 != 0 {
				kind = "x"
			}
			files++
			size += n
			entries = append(entries, entry{rel, treeLine(kind, rel, h)})
		default:
			return fmt.Errorf("%w: hash tree: %q is neither file, dir nor symlink", artifact.ErrRefused, rel)
		}
		return nil
	})
	if err != nil {
		return "", 0, 0, fmt.Errorf("hash tree %s: %w", dir, err)
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.rel, b.rel) })
	h := sha256.New()
	for _, e := range entries {
		io.WriteString(h, e.line)
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil)), files, size, nil
}

// treeLine is one entry's line: "KIND PATH" for a directory, "KIND PATH
// DETAIL" else, as it always was where that reads one way only (a file's
// DETAIL is 64 hex digits; a link's path holds no space, so its target
// is what follows the first space after it). Where it would read two
// ways (a link whose path holds a space, "l a b c"; a newline in any
// field, which would forge the next line) the line is "q KIND
// QUOTED-PATH QUOTED-DETAIL" instead (strconv.Quote: no raw newline, one
// parse), a kind no plain line has. Every pinned sum, made of plain
// lines, holds.
func treeLine(kind, rel, detail string) string {
	if strings.Contains(rel+detail, "\n") || kind == "l" && strings.Contains(rel, " ") {
		return "q " + kind + " " + strconv.Quote(rel) + " " + strconv.Quote(detail)
	}
	if kind == "d" {
		return kind + " " + rel
	}
	return kind + " " + rel + " " + detail
}

// CopyFile copies src to dst (created: it must not exist) with mode, and
// returns the sha256 of what it wrote.
func CopyFile(src, dst string, mode os.FileMode) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return "", err
	}
	if err := out.Close(); err != nil {
		return "", err
	}
	sum, _, err := hostfile.SHA256File(dst)
	return sum, err
}
