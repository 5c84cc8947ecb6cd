package certify

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/tidwall/gjson"

	"github.com/sandproof/sandproof/runner/canary"
	"github.com/sandproof/sandproof/runner/capture"
	"github.com/sandproof/sandproof/runner/hostfile"
)

// maxDecodeLine is the longest JSON line whose strings are parsed and
// decoded one by one (the events reader's line cap); every byte of every
// file is also searched as a stream, through the same decoders, without
// being held.
const maxDecodeLine = capture.MaxEventLine

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
// runner/canary (contract §8): as is, as the renderers escape it,
// reversed, hex, base64 at any alignment, below URL and JSON escapes; and
// on JSON lines up to 16 MiB, inside every string (nested JSON documents
// too). Files are opened without following links; anything but a regular
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

// jsonHas walks the JSON document's strings, decoded.
func jsonHas(v gjson.Result, m *canary.Matcher, depth int) bool {
	switch {
	case v.Type == gjson.String:
		s := v.String()
		if _, ok := m.Find([]byte(s)); ok {
			return true
		}
		if depth < 4 && (len(s) > 0 && (s[0] == '{' || s[0] == '[')) && gjson.Valid(s) {
			return jsonHas(gjson.Parse(s), m, depth+1)
		}
	case v.IsObject() || v.IsArray():
		found := false
		v.ForEach(func(k, el gjson.Result) bool {
			if _, ok := m.Find([]byte(k.String())); k.Type == gjson.String && ok || jsonHas(el, m, depth) {
				found = true
			}
			return !found
		})
		return found
	}
	return false
}

// fileHasCanary streams every byte of the file through the decoders, and
// parses each JSON line up to maxDecodeLine.
func fileHasCanary(p string, m *canary.Matcher, b *scanBudget) (bool, error) {
	f, err := hostfile.Open(p)
	if err != nil {
		return false, err
	}
	defer f.Close()
	st := m.NewStream()
	br := bufio.NewReaderSize(f, 1<<20)
	var line []byte
	long := false
	for {
		part, err := br.ReadSlice('\n')
		if berr := b.spend(len(part)); berr != nil {
			return false, fmt.Errorf("read %q: %w", p, berr)
		}
		st.Write(part)
		if !long && len(line) == 0 && len(part) > 0 && part[0] != '{' && part[0] != '[' && part[0] != '"' {
			long = true // not JSON: the stream search alone
		}
		switch {
		case long:
		case len(line)+len(part) > maxDecodeLine:
			line, long = line[:0], true
		default:
			line = append(line, part...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if !long && len(line) > 0 && gjson.ValidBytes(line) && jsonHas(gjson.ParseBytes(line), m, 0) {
			return true, nil
		}
		line, long = line[:0], false
		if err == io.EOF {
			_, found := st.Found()
			return found, nil
		}
		if err != nil {
			return false, fmt.Errorf("read %q: %w", p, err)
		}
	}
}
