package certify

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/sandproof/sandproof/runner/host/canary"
	"github.com/sandproof/sandproof/runner/host/hostfile"
)

// Scan bounds (contract §8 captured files are data): a case's files are
// bounded by the capture and relay budgets, so these are met only by a
// run dir that grew past them; a scan cut short is never a pass.
const (
	// DefaultScanBytes is how many bytes one canary search reads.
	DefaultScanBytes = 2 << 30
	// DefaultScanTime is how long one canary search may take.
	DefaultScanTime = 2 * time.Minute
)

// ErrScanBounded says a canary search stopped at its byte or time bound
// before it read every file: what it did not read is not known to be
// clean.
var ErrScanBounded = errors.New("canary search stopped at its bound")

// ScanLimits bound one canary search; zero fields mean the defaults.
type ScanLimits struct {
	Bytes int64
	Time  time.Duration
}

// FindCanary lists the files under dir that hold key in any encoding of
// runner/host/canary (contract §8): as is, as the renderers escape it,
// reversed, hex, base64 at any alignment, below URL and JSON escapes
// (nested JSON documents in strings too), searched as a stream in windows
// so that no line is held whole. Files are opened without following links; anything but a regular
// file is skipped. It reads at most DefaultScanBytes for at most
// DefaultScanTime.
func FindCanary(dir, key string) ([]string, error) {
	return FindCanaryLimit(dir, key, ScanLimits{})
}

// FindCanaryLimit is FindCanary within lim; past a bound it returns the
// hits so far and an error wrapping ErrScanBounded.
func FindCanaryLimit(dir, key string, lim ScanLimits) ([]string, error) {
	if lim.Bytes <= 0 {
		lim.Bytes = DefaultScanBytes
	}
	if lim.Time <= 0 {
		lim.Time = DefaultScanTime
	}
	b := &scanBudget{left: lim.Bytes, deadline: time.Now().Add(lim.Time), lim: lim}
	var hits []string
	m := canary.New(key)
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.Type().IsRegular() {
			return nil
		}
		found, err := fileHasCanary(p, m, b)
		if found {
			hits = append(hits, p)
		}
		return err
	})
	if err != nil {
		return hits, fmt.Errorf("search for the canary: %w", err)
	}
	return hits, nil
}

// scanBudget is what is left of one search's bounds.
type scanBudget struct {
	left     int64
	deadline time.Time
	lim      ScanLimits
}

func (b *scanBudget) spend(n int) error {
	b.left -= int64(n)
	if b.left < 0 {
		return fmt.Errorf("%w: read %d bytes", ErrScanBounded, b.lim.Bytes)
	}
	if time.Now().After(b.deadline) {
		return fmt.Errorf("%w: ran %s", ErrScanBounded, b.lim.Time)
	}
	return nil
}

// fileHasCanary streams every byte of the file through the decoders
// (runner/host/canary undoes JSON escapes wherever they are, nested JSON
// documents included, so no line is parsed or held).
func fileHasCanary(p string, m *canary.Matcher, b *scanBudget) (bool, error) {
	f, err := hostfile.Open(p)
	if err != nil {
		return false, err
	}
	defer f.Close()
	st := m.NewStream()
	buf := make([]byte, 1<<20)
	for {
		n, err := f.Read(buf)
		if berr := b.spend(n); berr != nil {
			return false, fmt.Errorf("read %q: %w", p, berr)
		}
		st.Write(buf[:n])
		if err == io.EOF {
			_, found := st.Found()
			return found, nil
		}
		if err != nil {
			return false, fmt.Errorf("read %q: %w", p, err)
		}
	}
}
