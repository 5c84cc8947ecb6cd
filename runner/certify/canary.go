package certify

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/tidwall/gjson"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/capture"
	"github.com/sandproof/sandproof/runner/hostfile"
)

// maxDecodeLine is the longest JSON line whose strings are decoded (the
// events reader's line cap); a longer line, and every line that does not
// start like JSON, is searched as a stream (as is and in base64) without
// being held.
const maxDecodeLine = capture.MaxEventLine

// FindCanary lists the files under dir that hold key in any encoding
// sandproof itself applies (contract §8): as is; as the renderers
// escape it (Markdown, HTML, XML, JSON, Printable); in base64 at any
// alignment, standard and URL alphabets (raw_b64 lines of the events
// file); and inside JSON strings, escapes decoded (then again as is or in
// base64, and nested JSON documents in strings too). Files are opened
// without following links; anything but a regular file is skipped.
func FindCanary(dir, key string) ([]string, error) {
	var hits []string
	needles := canaryNeedles(key)
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.Type().IsRegular() {
			return nil
		}
		found, err := fileHasCanary(p, needles)
		if err != nil {
			return err
		}
		if found {
			hits = append(hits, p)
		}
		return nil
	})
	if err != nil {
		return hits, fmt.Errorf("search for the canary: %w", err)
	}
	return hits, nil
}

// canaryNeedles are the byte strings whose presence means the key leaked.
func canaryNeedles(key string) [][]byte {
	seen := map[string]bool{}
	var out [][]byte
	add := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, []byte(s))
		}
	}
	for _, r := range reports.Renderings(key) {
		add(r)
	}
	// base64: with a prefix of 0, 1 or 2 bytes the key's bits start at a
	// different offset; keep the characters made of the key's bits only.
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for a := 0; a < 3; a++ {
			s := enc.EncodeToString(append(make([]byte, a), key...))
			from := (8*a + 5) / 6
			to := 8 * (a + len(key)) / 6
			if to-from >= 8 {
				add(s[from:to])
			}
		}
	}
	return out
}

func containsAny(b []byte, needles [][]byte) bool {
	for _, n := range needles {
		if bytes.Contains(b, n) {
			return true
		}
	}
	return false
}

// jsonHas walks the JSON document's strings, decoded.
func jsonHas(v gjson.Result, needles [][]byte, depth int) bool {
	switch {
	case v.Type == gjson.String:
		s := v.String()
		if containsAny([]byte(s), needles) {
			return true
		}
		if depth < 4 && (len(s) > 0 && (s[0] == '{' || s[0] == '[')) && gjson.Valid(s) {
			return jsonHas(gjson.Parse(s), needles, depth+1)
		}
	case v.IsObject() || v.IsArray():
		found := false
		v.ForEach(func(k, el gjson.Result) bool {
			if k.Type == gjson.String && containsAny([]byte(k.String()), needles) || jsonHas(el, needles, depth) {
				found = true
			}
			return !found
		})
		return found
	}
	return false
}

func fileHasCanary(p string, needles [][]byte) (bool, error) {
	f, err := hostfile.Open(p)
	if err != nil {
		return false, err
	}
	defer f.Close()
	longest := 0
	for _, n := range needles {
		longest = max(longest, len(n))
	}
	br := bufio.NewReaderSize(f, 1<<20)
	var line, carry []byte
	long := false
	for {
		part, err := br.ReadSlice('\n')
		if !long && len(line) == 0 && len(part) > 0 && part[0] != '{' && part[0] != '[' && part[0] != '"' {
			long = true // not JSON: nothing to decode, stream it
		}
		switch {
		case long:
			chunk := append(carry, part...)
			if containsAny(chunk, needles) {
				return true, nil
			}
			carry = append(carry[:0], chunk[max(0, len(chunk)-longest):]...)
		case len(line)+len(part) > maxDecodeLine:
			// Too long to decode: searched as a stream from here on.
			chunk := append(line, part...)
			if containsAny(chunk, needles) {
				return true, nil
			}
			carry = append([]byte(nil), chunk[max(0, len(chunk)-longest):]...)
			line, long = nil, true
		default:
			line = append(line, part...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if !long && len(line) > 0 {
			if containsAny(line, needles) {
				return true, nil
			}
			if t := bytes.TrimSpace(line); len(t) > 0 && (t[0] == '{' || t[0] == '[' || t[0] == '"') && gjson.ValidBytes(t) && jsonHas(gjson.ParseBytes(t), needles, 0) {
				return true, nil
			}
		}
		line, carry, long = line[:0], carry[:0], false
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("read %q: %w", p, err)
		}
	}
}
