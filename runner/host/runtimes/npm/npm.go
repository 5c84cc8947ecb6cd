package npm

import (
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
	"path/filepath"
	"strings"

	"github.com/sandproof/sandproof/runner/host/artifact"
	"github.com/sandproof/sandproof/runner/host/runtimes"
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
		return "", fmt.Errorf("%w: %s@%s tarball is %s, pinned %s", runtimes.ErrChecksum, pkg, version, got, want)
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

// Caps on one npm tarball unpacked by the host. The largest seen are
// Claude Code's platform package (one 402 MB file), Codex's (315 MB of
// bin/codex) and a 311 MB package of 12,583 files; the caps sit well
// above them and bound what a pinned tarball (its content is the
// harness's: a gzip bomb compresses a thousand to one) may put on the
// disk that holds the runtime cache.
var npmLimits = artifact.Limits{FileBytes: 1 << 30, TotalBytes: 2 << 30, Entries: 100_000}

// extractPackage unpacks an npm tarball into dst (which must not exist;
// its parent is made) the way npm does: the first path segment of every
// entry is dropped (usually "package/", but some packages use another), a
// file listed twice keeps its last copy (as tar does), and modes are
// normalised to 0755 (any executable bit) or 0644. It is an artifact.Tree:
// only directories and regular files, no entry outside dst, each file and
// the whole capped (npmLimits); a refusal wraps artifact.ErrRefused.
func extractPackage(tgz, dst string) error {
	f, err := os.Open(tgz)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return artifact.Refusal(fmt.Errorf("extract %s: %w", filepath.Base(tgz), err))
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	t, err := artifact.Create(dst, npmLimits)
	if err != nil {
		return fmt.Errorf("extract %s: %w", filepath.Base(tgz), err)
	}
	defer t.Close()
	if err := artifact.Untar(gz, t, npmEntryName); err != nil {
		return fmt.Errorf("extract %s: %w", filepath.Base(tgz), err)
	}
	return nil
}

// npmEntryName is an npm tarball entry's path in the package: its name
// without the first segment ("" for the top directory itself).
func npmEntryName(name string) string {
	_, rel, _ := strings.Cut(strings.TrimPrefix(name, "./"), "/")
	return rel
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
// It is runtimes.ErrUnreachable (errors.Is), which the kind-neutral
// preparer reports as adapter.ErrUnavailable, under npm's own words.
var ErrUnreachable error = unreachable{}

type unreachable struct{}

func (unreachable) Error() string        { return "npm registry unreachable" }
func (unreachable) Is(target error) bool { return target == runtimes.ErrUnreachable }

// ErrNotFound means the registry does not have the package or version.
var ErrNotFound = errors.New("not in the npm registry")

// clip shortens what npm printed to what an error message can hold.
func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}
