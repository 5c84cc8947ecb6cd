package docker

import (
	"archive/tar"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"github.com/sandproof/sandproof/runner/host/provider"
)

// tarFile streams a tar holding one regular file at p (relative to "/").
// Parents are not in the archive on purpose: the engine creates the missing
// ones and a directory entry would reset an existing directory's mode and
// owner.
func tarFile(p string, data io.Reader, size int64, mode os.FileMode, uid, gid int) *io.PipeReader {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(provider.WriteTarFile(pw, p, data, size, mode, uid, gid)) }()
	return pr
}

// tarDir streams a tar holding one directory entry.
func tarDir(p string, mode os.FileMode, uid, gid int) *io.PipeReader {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := tw.WriteHeader(&tar.Header{
			Typeflag: tar.TypeDir,
			Name:     strings.TrimPrefix(path.Clean(p), "/") + "/",
			Mode:     int64(mode.Perm()),
			Uid:      uid,
			Gid:      gid,
			ModTime:  time.Now(),
			Format:   tar.FormatPAX,
		})
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr
}

// The host-side consumer of a sandbox's archive and the producer of a
// batch's archive live in runner/host/provider (tar.go), shared with the session
// agent's wrapper (runner/agent); these names keep docker.go as it was.
var errReadCap = provider.ErrReadCap

func untarTo(r io.Reader, dst, sbPath string, lim provider.FetchLimits) (provider.Fetched, error) {
	return provider.Untar(r, dst, sbPath, lim)
}

func tarEntries(entries []provider.Entry) *io.PipeReader { return provider.TarEntries(entries) }
