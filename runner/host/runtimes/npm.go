package runtimes

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// npmCmd runs npm with the caller's npm configuration (registry, cache,
// proxy) but no update notifier, audit or funding noise. An npm that could
// not reach the registry at all (or no npm) is ErrUnreachable; a package
// or version the registry does not have is ErrNotFound.
func npmCmd(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "npm", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "npm_config_update_notifier=false", "npm_config_fund=false", "npm_config_audit=false")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		text := clip(strings.TrimSpace(stderr.String()))
		err = fmt.Errorf("npm %s: %w: %s", strings.Join(args, " "), err, text)
		if errors.Is(err, exec.ErrNotFound) {
			return out, fmt.Errorf("%w: %v", ErrUnreachable, err)
		}
		for _, code := range []string{"ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "ECONNRESET", "ENETUNREACH", "EHOSTUNREACH"} {
			if strings.Contains(text, code) {
				return out, fmt.Errorf("%w: %v", ErrUnreachable, err)
			}
		}
		if strings.Contains(text, "E404") || strings.Contains(text, "ETARGET") {
			return out, fmt.Errorf("%w: %v", ErrNotFound, err)
		}
		return out, err
	}
	return out, nil
}

// npmPack downloads PKG@VERSION as a tarball into dir and checks its sha512
// integrity against want ("sha512-BASE64"), computed here rather than
// taken from npm's own report.
func npmPack(ctx context.Context, dir, pkg, version, want string) (string, error) {
	out, err := npmCmd(ctx, dir, "pack", "--json", "--pack-destination", dir, pkg+"@"+version)
	if errors.Is(err, ErrNotFound) {
		return "", fmt.Errorf("the registry has no %s@%s: %w", pkg, version, err)
	}
	if err != nil {
		return "", err
	}
	var res []struct {
		Filename  string `json:"filename"`
		Integrity string `json:"integrity"`
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res) != 1 {
		return "", fmt.Errorf("npm pack %s@%s: unexpected output %q", pkg, version, clip(string(out)))
	}
	tgz := filepath.Join(dir, filepath.Base(res[0].Filename))
	got, err := integrity(tgz)
	if err != nil {
		return "", err
	}
	if got != want {
		return "", fmt.Errorf("%w: %s@%s tarball is %s, pinned %s", ErrChecksum, pkg, version, got, want)
	}
	return tgz, nil
}

// integrity is npm's "sha512-BASE64" of a file.
func integrity(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha512.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return "sha512-" + base64.StdEncoding.EncodeToString(h.Sum(nil)), nil
}

// extractPackage unpacks an npm tarball into dst the way npm does: the
// first path segment of every entry is dropped (usually "package/", but
// some packages use another), a file listed twice keeps its last copy (as
// tar does), and modes are normalised to 0755 (any executable bit) or 0644.
// Only directories and regular files are accepted (pax headers are
// metadata), and no entry may leave dst.
func extractPackage(tgz, dst string) error {
	f, err := os.Open(tgz)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("extract %s: %w", filepath.Base(tgz), err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("extract %s: %w", filepath.Base(tgz), err)
		}
		if h.Typeflag == tar.TypeXGlobalHeader || h.Typeflag == tar.TypeXHeader {
			continue
		}
		name := strings.TrimPrefix(h.Name, "./")
		_, rel, _ := strings.Cut(name, "/")
		rel = strings.TrimSuffix(rel, "/")
		if rel == "" {
			continue // the top directory itself
		}
		if strings.ContainsRune(rel, 0) || path.IsAbs(rel) || path.Clean(rel) != rel || rel == ".." || strings.HasPrefix(rel, "../") {
			return fmt.Errorf("extract %s: entry %q leaves the package", filepath.Base(tgz), h.Name)
		}
		to := filepath.Join(dst, filepath.FromSlash(rel))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(to, 0o755); err != nil {
				return fmt.Errorf("extract %s: %w", filepath.Base(tgz), err)
			}
		case tar.TypeReg, tar.TypeRegA:
			mode := os.FileMode(0o644)
			if h.Mode&0o111 != 0 {
				mode = 0o755
			}
			if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
				return fmt.Errorf("extract %s: %w", filepath.Base(tgz), err)
			}
			// A second copy of a file replaces the first; a file where a
			// directory was is refused by the open.
			if fi, err := os.Lstat(to); err == nil && fi.Mode().IsRegular() {
				if err := os.Remove(to); err != nil {
					return err
				}
			}
			out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
			if err != nil {
				return fmt.Errorf("extract %s: %w", filepath.Base(tgz), err)
			}
			if _, err := io.Copy(out, tr); err != nil {
				out.Close()
				return fmt.Errorf("extract %s: %w", filepath.Base(tgz), err)
			}
			if err := out.Close(); err != nil {
				return err
			}
		default:
			return fmt.Errorf("extract %s: entry %q is not a file or directory (type %q)", filepath.Base(tgz), h.Name, h.Typeflag)
		}
	}
}

// RegistryReachable asks the registry for the version of pkg. It returns
// ErrUnreachable (wrapped) when npm could not reach it, ErrNotFound when the
// registry does not know the package or version, and a plain error when it
// answered something unexpected.
func RegistryReachable(ctx context.Context, pkg, version string) error {
	out, err := npmCmd(ctx, "", "view", "--json", pkg+"@"+version, "version")
	if err != nil {
		return err
	}
	var v string
	if err := json.Unmarshal(out, &v); err != nil || v != version {
		return fmt.Errorf("npm view %s@%s answered %q", pkg, version, clip(string(out)))
	}
	return nil
}

// ErrUnreachable means npm (or the registry) could not be reached at all.
var ErrUnreachable = errors.New("npm registry unreachable")

// ErrNotFound means the registry does not have the package or version.
var ErrNotFound = errors.New("not in the npm registry")
