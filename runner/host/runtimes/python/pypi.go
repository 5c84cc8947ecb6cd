package python

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/sandproof/sandproof/runner/host/runtimes"
)

// IndexEnv overrides the index's Simple API base (default PyPI's).
const IndexEnv = "SANDPROOF_PYPI_URL"

// DefaultIndex is PyPI's Simple API, which serves JSON (PEP 691) to a
// client that asks for it: every index pip can use speaks it.
const DefaultIndex = "https://pypi.org/simple"

// Caps on what the index may send: a project's page of a package with
// thousands of releases is a few MiB, the largest wheels of an agent's
// dependencies tens of MiB.
const (
	maxProjectJSON = 32 << 20
	maxWheelBytes  = 512 << 20
)

// Deadlines of one request: a page, a wheel (a stalled index fails the
// preparation instead of holding it). Variables for the tests.
var (
	pageDeadline  = 2 * time.Minute
	wheelDeadline = 10 * time.Minute
)

// Index is a package index's Simple API. The files it lists are only
// candidates: a wheel is taken when its sha256 is one the lock pins, and
// checked again on the bytes downloaded.
type Index struct {
	Base   string
	Client *http.Client
}

// DefaultIndexFromEnv is $SANDPROOF_PYPI_URL or PyPI.
func DefaultIndexFromEnv() Index {
	base := os.Getenv(IndexEnv)
	if base == "" {
		base = DefaultIndex
	}
	return Index{Base: strings.TrimSuffix(base, "/"), Client: http.DefaultClient}
}

// File is one file of a release, as the index lists it.
type File struct {
	Filename string `json:"filename"`
	URL      string `json:"url"`
	Hashes   struct {
		SHA256 string `json:"sha256"`
	} `json:"hashes"`
	// RequiresPython is the file's Requires-Python, as the index lists it.
	RequiresPython string `json:"requires-python"`
	// PackageType is "bdist_wheel" or "sdist", from the file's name.
	PackageType string `json:"-"`
}

// Files lists the files of name==version: a wheel of that version, or a
// source distribution (so that "only an sdist" can be said).
func (ix Index) Files(ctx context.Context, name, version string) ([]File, error) {
	u := fmt.Sprintf("%s/%s/", ix.Base, name)
	body, status, err := ix.get(ctx, u, maxProjectJSON, "application/vnd.pypi.simple.v1+json")
	if err != nil {
		return nil, err
	}
	if status == http.StatusNotFound {
		return nil, fmt.Errorf("the index has no project %s (%s: 404)", name, u)
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %d", u, status)
	}
	base, err := url.Parse(u)
	if err != nil {
		return nil, err
	}
	var out []File
	err = eachFile(body, func(f File) error {
		if w, err := ParseWheelName(f.Filename); err == nil {
			if w.Name != name || w.Version != version {
				return nil
			}
			f.PackageType = "bdist_wheel"
		} else if isSdist(f.Filename, name, version) {
			f.PackageType = "sdist"
		} else {
			return nil
		}
		ref, err := url.Parse(f.URL)
		if err != nil {
			return fmt.Errorf("%s: file %q: %v", u, f.Filename, err)
		}
		to := base.ResolveReference(ref)
		if err := fetchable(base, to); err != nil {
			return fmt.Errorf("%s: file %q: %w", u, f.Filename, err)
		}
		f.URL = to.String()
		out = append(out, f)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the index has no file of %s==%s (%s)", name, version, u)
	}
	return out, nil
}

// maxProjectFiles caps the files a project page may list: the largest
// projects list a few tens of thousands.
const maxProjectFiles = 200_000

// eachFile streams the Simple API page's "files" array, one File at a
// time, so a page of millions of tiny entries is refused at the cap
// rather than decoded whole (red team rt37).
func eachFile(body []byte, fn func(File) error) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("not the Simple API's JSON: want an object")
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return fmt.Errorf("not the Simple API's JSON: %v", err)
		}
		if key != "files" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return fmt.Errorf("not the Simple API's JSON: %v", err)
			}
			continue
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('[') {
			return fmt.Errorf("not the Simple API's JSON: files is not a list")
		}
		for n := 0; dec.More(); n++ {
			if n == maxProjectFiles {
				return fmt.Errorf("the project page lists more than %d files", maxProjectFiles)
			}
			var f File
			if err := dec.Decode(&f); err != nil {
				return fmt.Errorf("not the Simple API's JSON: %v", err)
			}
			if err := fn(f); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("not the Simple API's JSON: no files")
}

// fetchable is where the host may fetch a file the index lists, or be
// redirected to: https with a host and no credentials, or the index's own
// scheme and host (a local index of its own files). What the index names
// is the index's choice, not the lock's: without the rule a hostile page
// had the host GET any address, with credentials, over plain http (red
// team rt37; npm's tarballURL is the same rule).
func fetchable(index, u *url.URL) error {
	switch {
	case u.User != nil:
		return fmt.Errorf("%w: %s carries credentials", errNotFetchable, u.Redacted())
	case u.Host == "":
		return fmt.Errorf("%w: %q has no host", errNotFetchable, u.String())
	case u.Scheme == "https", u.Scheme == index.Scheme && u.Host == index.Host:
		return nil
	}
	return fmt.Errorf("%w: %s is not https (nor the index's own %s://%s)", errNotFetchable, u.Redacted(), index.Scheme, index.Host)
}

var errNotFetchable = errors.New("not a URL the host fetches")

// isSdist is a source distribution's name of name==version.
func isSdist(file, name, version string) bool {
	for _, ext := range []string{".tar.gz", ".zip"} {
		if stem, ok := strings.CutSuffix(file, ext); ok {
			n, v, ok := strings.Cut(stem, "-"+version)
			return ok && v == "" && Normalize(n) == name
		}
	}
	return false
}

// get reads at most limit bytes of u; a body over it is an error. An
// index that cannot be reached at all wraps runtimes.ErrUnreachable.
func (ix Index) get(ctx context.Context, u string, limit int64, accept string) ([]byte, int, error) {
	deadline := pageDeadline
	if limit > maxProjectJSON {
		deadline = wheelDeadline
	}
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	index, err := url.Parse(ix.Base)
	if err != nil {
		return nil, 0, err
	}
	client := *ix.Client
	client.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return fmt.Errorf("%w: more than 5 redirects", errNotFetchable)
		}
		return fetchable(index, r.URL)
	}
	resp, err := client.Do(req)
	if err != nil {
		var ne net.Error
		var oe *net.OpError
		if !errors.Is(err, errNotFetchable) && (errors.As(err, &oe) || errors.As(err, &ne)) {
			return nil, 0, fmt.Errorf("%w: %v", runtimes.ErrUnreachable, err)
		}
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", u, err)
	}
	if int64(len(b)) > limit {
		return nil, 0, fmt.Errorf("%s: more than %d bytes", u, limit)
	}
	return b, resp.StatusCode, nil
}

// Choose is the wheel of r the runtime installs on p: the best fitting
// of the release's wheels whose sha256 the lock pins. Why there is none
// is said in the terms a lock's author can act on.
func Choose(r Requirement, files []File, p Platform) (File, Wheel, error) {
	var best File
	var bestW Wheel
	score := 0
	var wheels, fitting []string
	needs := "" // a pinned, fitting wheel's Requires-Python that excludes p
	for _, f := range files {
		w, err := ParseWheelName(f.Filename)
		if f.PackageType != "bdist_wheel" || err != nil {
			continue
		}
		wheels = append(wheels, f.Filename)
		s := w.Score(p)
		if s == 0 {
			continue
		}
		fitting = append(fitting, f.Filename)
		if !slices.Contains(r.Hashes, f.Hashes.SHA256) {
			continue
		}
		if allowed, _ := Allows(f.RequiresPython, [3]int{p.Major, p.Minor, p.Micro}); !allowed {
			needs = f.RequiresPython
			continue
		}
		if s > score || s == score && f.Filename < best.Filename {
			best, bestW, score = f, w, s
		}
	}
	switch {
	case score > 0:
		return best, bestW, nil
	case len(wheels) == 0:
		return File{}, Wheel{}, fmt.Errorf("%s==%s (lock line %d) has no wheel on the index, only a source distribution: sandproof installs wheels only (--only-binary=:all:); pin a version that has one", r.Name, r.Version, r.Line)
	case needs != "":
		return File{}, Wheel{}, fmt.Errorf("%s==%s (lock line %d) requires Python %s; the tree's CPython is %d.%d.%d: pin a version that allows it, or resolve the lock with --python-version %d.%d", r.Name, r.Version, r.Line, needs, p.Major, p.Minor, p.Micro, p.Major, p.Minor)
	case len(fitting) == 0:
		return File{}, Wheel{}, fmt.Errorf("%s==%s (lock line %d) has no wheel for %s (the index has %s)", r.Name, r.Version, r.Line, p, strings.Join(wheels, ", "))
	default:
		return File{}, Wheel{}, fmt.Errorf("%s==%s (lock line %d): the lock's sha256 match none of its wheels for %s (%s): regenerate the lock for this platform", r.Name, r.Version, r.Line, p, strings.Join(fitting, ", "))
	}
}

// Download writes f into path, checking its size cap and that its
// sha256 is want.
func (ix Index) Download(ctx context.Context, f File, want, path string) error {
	body, status, err := ix.get(ctx, f.URL, maxWheelBytes, "")
	if err != nil {
		return fmt.Errorf("download %s: %w", f.Filename, err)
	}
	if status != http.StatusOK {
		return fmt.Errorf("download %s: HTTP %d", f.Filename, status)
	}
	sum := sha256.Sum256(body)
	if got := hex.EncodeToString(sum[:]); got != want {
		return fmt.Errorf("download %s: sha256 %s, the lock pins %s", f.Filename, got, want)
	}
	return os.WriteFile(path, body, 0o644)
}
