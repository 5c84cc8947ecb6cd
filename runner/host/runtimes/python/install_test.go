package python

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/runner/host/artifact"
	"github.com/sandproof/sandproof/runner/host/runtimes"
)

type wheelFile struct {
	name string
	mode fs.FileMode
	data string
}

func wheelBytes(t *testing.T, files ...wheelFile) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		h := &zip.FileHeader{Name: f.name, Method: zip.Deflate}
		h.SetMode(f.mode | 0o644)
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(f.data))
	}
	zw.Close()
	return buf.Bytes()
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// index serves one release of x==1.0 with one wheel, as PyPI's JSON API
// does, and counts the requests.
func index(t *testing.T, filename string, wheel []byte) (Index, *int) {
	t.Helper()
	hits := new(int)
	mux := http.NewServeMux()
	var srv *httptest.Server
	mux.HandleFunc("/simple/x/", func(w http.ResponseWriter, r *http.Request) {
		*hits++
		f := file(filename, sum(wheel))
		f.URL = srv.URL + "/files/" + filename
		json.NewEncoder(w).Encode(map[string]any{"files": []File{f}})
	})
	mux.HandleFunc("/files/", func(w http.ResponseWriter, r *http.Request) { w.Write(wheel) })
	srv = httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return Index{Base: srv.URL + "/simple", Client: srv.Client()}, hits
}

func install(t *testing.T, ix Index, r Requirement) (string, error) {
	t.Helper()
	site := filepath.Join(t.TempDir(), "site")
	tr, err := artifact.Create(site, wheelLimits)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	_, err = installWheel(context.Background(), ix, r, cp313, t.TempDir(), tr)
	return site, err
}

func TestInstallWheelUnpacksIntoSitePackagesOnly(t *testing.T) {
	w := wheelBytes(t,
		wheelFile{name: "x/__init__.py", data: "X = 1\n"},
		wheelFile{name: "x-1.0.data/purelib/x/extra.py", data: "E = 1\n"},
		wheelFile{name: "x-1.0.data/scripts/x", data: "#!/bin/sh\n"},
		wheelFile{name: "x-1.0.data/data/etc/profile.d/x.sh", data: "evil\n"},
		wheelFile{name: "x-1.0.dist-info/METADATA", data: "Name: x\n"},
	)
	ix, _ := index(t, "x-1.0-py3-none-any.whl", w)
	site, err := install(t, ix, Requirement{Name: "x", Version: "1.0", Hashes: []string{sum(w)}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	filepath.WalkDir(site, func(p string, d fs.DirEntry, err error) error {
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(site, p)
			got = append(got, rel)
		}
		return nil
	})
	if strings.Join(got, " ") != "x/__init__.py x/extra.py x-1.0.dist-info/METADATA" {
		t.Errorf("site-packages holds %q", got)
	}
}

// What a hostile package author controls: the wheel's bytes, its names
// and modes, its sizes. None of it leaves the tree or goes uncapped.
func TestInstallWheelRefusesAHostileWheel(t *testing.T) {
	for _, tc := range []struct {
		why   string
		files []wheelFile
	}{
		{"a link out of the tree", []wheelFile{{name: "x/passwd", mode: fs.ModeSymlink, data: "/etc/passwd"}}},
		{"a name out of the tree", []wheelFile{{name: "../../../etc/cron.d/x", data: "evil"}}},
		{"a name out of the tree through .data", []wheelFile{{name: "x-1.0.data/purelib/../../x", data: "evil"}}},
		{"a device", []wheelFile{{name: "x/dev", mode: fs.ModeDevice}}},
	} {
		t.Run(tc.why, func(t *testing.T) {
			w := wheelBytes(t, tc.files...)
			ix, _ := index(t, "x-1.0-py3-none-any.whl", w)
			_, err := install(t, ix, Requirement{Name: "x", Version: "1.0", Hashes: []string{sum(w)}})
			if !errors.Is(err, artifact.ErrRefused) {
				t.Fatalf("install = %v, want refused", err)
			}
		})
	}
}

func TestInstallWheelChecksTheBytesAgainstTheLock(t *testing.T) {
	w := wheelBytes(t, wheelFile{name: "x/__init__.py", data: "X = 1\n"})
	// The index lists the lock's hash, then serves other bytes.
	swapped := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/simple/") {
			f := file("x-1.0-py3-none-any.whl", sum(w))
			f.URL = "http://" + r.Host + "/files/x.whl"
			json.NewEncoder(rw).Encode(map[string]any{"files": []File{f}})
			return
		}
		rw.Write(wheelBytes(t, wheelFile{name: "x/__init__.py", data: "import os; os.system('evil')\n"}))
	}))
	defer swapped.Close()
	_, err := install(t, Index{Base: swapped.URL + "/simple", Client: swapped.Client()}, Requirement{Name: "x", Version: "1.0", Hashes: []string{sum(w)}})
	if err == nil || !strings.Contains(err.Error(), "the lock pins "+sum(w)) {
		t.Fatalf("install = %v, want the sha256 refusal", err)
	}
}

func TestIndexUnreachableIsUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close()
	_, err := Index{Base: base, Client: http.DefaultClient}.Files(context.Background(), "x", "1.0")
	if !errors.Is(err, runtimes.ErrUnreachable) {
		t.Fatalf("Files = %v, want unreachable", err)
	}
}
