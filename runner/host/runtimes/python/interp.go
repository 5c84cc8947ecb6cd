package python

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/artifact"
)

// InterpInfo describes an interpreter tree StageInterpreter made. Paths
// are relative to the tree's directory, slash-separated.
type InterpInfo struct {
	// Version is CPython's ("3.13.5").
	Version string
	// Source names the Debian package the interpreter is
	// ("debian trixie python3.13 3.13.5-2+deb13u5").
	Source string
	// SHA256 is the sum of the pinned .debs' names, versions and sums
	// (pinsSum): two trees of one SHA256 hold the same files.
	SHA256 string
	// Launcher is the POSIX sh script that starts the interpreter
	// through the tree's own loader ("usr/bin/python3").
	Launcher string
	// SitePackages is the directory the interpreter's site.py puts on
	// sys.path, empty in the tree, where packages go.
	SitePackages string
}

// InterpOptions says where and for what StageInterpreter stages.
type InterpOptions struct {
	// Dir is the tree's directory; it must not exist (its parent must).
	Dir string
	// Arch is the machine, in GOARCH spelling ("amd64").
	Arch string
	// Cache is the directory the .debs are kept in, by sha256; it is made
	// if missing. "" keeps nothing: every stage fetches.
	Cache string
	// Fetch gets a URL; nil means HTTPFetch.
	Fetch Fetcher
}

// interpLimits bound the tree: the interpreter is about 45 MB in about
// 900 files; the largest file (the interpreter, libcrypto) is 7 MB.
var interpLimits = artifact.Limits{FileBytes: 32 << 20, TotalBytes: 160 << 20, Entries: 4000}

// Launcher and SitePackages are the tree's paths InterpInfo names.
const (
	launcherPath     = "usr/bin/python3"
	sitePackagesPath = "usr/lib/python3/dist-packages"
)

// StageInterpreter makes o.Dir a CPython tree that runs from wherever it
// is mounted, in an image of any libc or none: Debian trixie's python3.13
// with trixie's glibc and the libraries its ELF files need, from the
// pinned .debs (interpPins), each checked against its sha256 before a
// byte of it is read, and a launcher that starts the interpreter through
// the tree's loader. An arch without pins is adapter.ErrPlatform.
func StageInterpreter(ctx context.Context, o InterpOptions) (InterpInfo, error) {
	pins, ok := interpPins[o.Arch]
	if !ok {
		return InterpInfo{}, fmt.Errorf("%w: the python interpreter is pinned for %s, not %s", adapter.ErrPlatform, strings.Join(pinnedArches(), ", "), o.Arch)
	}
	if o.Fetch == nil {
		o.Fetch = HTTPFetch
	}
	t, err := artifact.Create(o.Dir, interpLimits)
	if err != nil {
		return InterpInfo{}, err
	}
	defer t.Close()
	triplet := triplets[o.Arch]
	for _, p := range pins {
		deb, err := p.open(ctx, o.Cache, o.Fetch)
		if err != nil {
			return InterpInfo{}, err
		}
		err = unpackDeb(ctx, deb, p.Size, t, keepInTree(triplet))
		deb.Close()
		if err != nil {
			return InterpInfo{}, fmt.Errorf("unpack %s: %w", p.deb(), err)
		}
	}
	if err := finishTree(t, o.Arch); err != nil {
		return InterpInfo{}, err
	}
	return interpInfo(pins), nil
}

// triplets are the Debian multiarch names of the pinned arches.
var triplets = map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}

// loaders are the glibc loaders' file names, in the multiarch dir.
var loaders = map[string]string{"amd64": "ld-linux-x86-64.so.2", "arm64": "ld-linux-aarch64.so.1"}

// keepInTree maps a .deb's data.tar name ("./usr/bin/python3.13") to its
// name in the tree, or "" to leave it out: the interpreter, its standard
// library, and the shared objects directly in the multiarch library dir
// (OpenSSL's engines, glibc's gconv modules are left out). Debian's
// sitecustomize.py, a link to /etc/python3.13/sitecustomize.py, would
// run the image's file: left out. Directories are made as files need
// them.
func keepInTree(triplet string) func(string) string {
	return func(n string) string {
		n = strings.TrimPrefix(n, "./")
		switch dir, base := path.Split(n); {
		case n == "usr/bin/python3.13":
		case strings.HasPrefix(n, "usr/lib/python3.13/") && n != "usr/lib/python3.13/sitecustomize.py":
		case dir == "usr/lib/"+triplet+"/" && strings.Contains(base, ".so"):
		default:
			return ""
		}
		return n
	}
}

// launcher is usr/bin/python3. It runs under any POSIX sh (BusyBox's
// too) and finds the tree from its own path, so the tree may be mounted
// anywhere. The loader runs the interpreter with the tree's libraries
// (--library-path, --inhibit-cache: never the image's ld.so.cache), and
// nothing goes into the environment, so the programs the interpreter
// starts use the image's own libc. --argv0 makes sys.executable this
// script (a child `sys.executable -c ...` starts through it again) and
// sys.prefix the tree's usr; -I keeps PYTHON* variables, the user's site
// dir and the working directory out of sys.path. Started through a
// symbolic link elsewhere, it would look for the tree beside the link.
const launcher = `#!/bin/sh
case $0 in */*) d=${0%%/*} ;; *) d=. ;; esac
case $d in /*) ;; *) d=$PWD/$d ;; esac
l=$d/../lib/%[1]s
exec "$l/%[2]s" --inhibit-cache --library-path "$l" --argv0 "$0" "$d/python3.13" -I "$@"
`

// finishTree writes the launcher and the empty site-packages dir.
func finishTree(t *artifact.Tree, arch string) error {
	s := fmt.Sprintf(launcher, triplets[arch], loaders[arch])
	if err := t.WriteFile(launcherPath, true, int64(len(s)), strings.NewReader(s)); err != nil {
		return err
	}
	return t.Mkdir(sitePackagesPath)
}

// interpInfo describes the tree pins make.
func interpInfo(pins []debPin) InterpInfo {
	py := pins[0]
	return InterpInfo{
		Version:      strings.SplitN(py.Version, "-", 2)[0],
		Source:       "debian trixie " + strings.TrimSuffix(py.Package, "-minimal") + " " + py.Version,
		SHA256:       pinsSum(pins),
		Launcher:     launcherPath,
		SitePackages: sitePackagesPath,
	}
}

// pinsSum is the sha256 of pins' lines "package version sha256".
func pinsSum(pins []debPin) string {
	h := sha256.New()
	for _, p := range pins {
		fmt.Fprintf(h, "%s %s %s\n", p.Package, p.Version, p.SHA256)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// pinnedArches are the arches interpPins covers, sorted.
func pinnedArches() []string {
	return slices.Sorted(maps.Keys(interpPins))
}
