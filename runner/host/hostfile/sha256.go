package hostfile

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
)

// SHA256File is the hex sha256 of the file at p and its length in bytes.
// p is a host file sandproof chose or made (the warden binary, a runtime
// file a manifest names, a file of a prepared runtime tree, an executable
// a glibc layer patched), not one that came out of a sandbox, so it is
// opened as os.Open opens it: a link is followed and nothing caps the
// read, unlike Open and ReadFile. Errors are returned as os.Open and
// io.Copy give them (the evidence records some as they read).
func SHA256File(p string) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}
