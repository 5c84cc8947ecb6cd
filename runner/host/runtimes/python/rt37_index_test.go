package python

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// rt37Recorder passes requests to loopback through and records every
// other URL the client asks for, refusing it without dialing (no private
// address is ever contacted).
type rt37Recorder struct {
	mu   sync.Mutex
	away []string
}

func (r *rt37Recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && strings.HasPrefix(req.URL.Host, "127.0.0.1:") {
		return http.DefaultTransport.RoundTrip(req)
	}
	r.mu.Lock()
	r.away = append(r.away, req.URL.String())
	r.mu.Unlock()
	return nil, errors.New("rt37: not dialed")
}

// Class A (host operation steered): the index chooses where the host
// fetches a wheel from: any scheme the client speaks, any host, private
// ranges and credentials included, and any redirect. The sha256 keeps
// the bytes out of the tree, but the GET is made (a blind request into
// the host's network; the status and the body's sha256 come back in the
// error). npm's kind refuses a lock entry that is not an https URL with
// a host and no credentials (npm.tarballURL).
func TestRT37IndexChoosesWhereTheHostFetches(t *testing.T) {
	w := wheelBytes(t, wheelFile{name: "x/__init__.py", data: "X = 1\n"})
	for _, tc := range []struct{ why, url string }{
		{"a private address", "http://10.1.2.3/x-1.0-py3-none-any.whl"},
		{"the metadata service", "http://169.254.169.254/latest/meta-data/"},
		{"credentials of another host", "http://user:secret@internal.example/x.whl"},
		{"a redirect to the metadata service", "REDIRECT"},
	} {
		t.Run(tc.why, func(t *testing.T) {
			rec := &rt37Recorder{}
			var srv *httptest.Server
			srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				if strings.HasPrefix(r.URL.Path, "/simple/") {
					f := file("x-1.0-py3-none-any.whl", sum(w))
					f.URL = tc.url
					if tc.url == "REDIRECT" {
						f.URL = "/files/x.whl"
					}
					json.NewEncoder(rw).Encode(map[string]any{"files": []File{f}})
					return
				}
				http.Redirect(rw, r, "http://169.254.169.254/latest/meta-data/iam/", http.StatusFound)
			}))
			defer srv.Close()
			ix := Index{Base: srv.URL + "/simple", Client: &http.Client{Transport: rec}}
			files, err := ix.Files(context.Background(), "x", "1.0")
			if err == nil {
				var f File
				if f, _, err = Choose(Requirement{Name: "x", Version: "1.0", Hashes: []string{sum(w)}}, files, cp313); err == nil {
					err = ix.Download(context.Background(), f, sum(w), filepath.Join(t.TempDir(), "x.whl"))
				}
			}
			t.Logf("the host asked for %q; %v", rec.away, err)
			if len(rec.away) > 0 {
				t.Errorf("BROKE: the index made the host GET %s", rec.away[0])
			}
			if !errors.Is(err, errNotFetchable) {
				t.Errorf("err = %v, want the URL refused", err)
			}
		})
	}
}

// Class C (time): no request to the index has a deadline, and certify's
// preparation context has none: an index that sends its headers and then
// nothing holds the preparation for good (the .debs' fetch has 5 min).
func TestRT37IndexStallHasNoDeadline(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Write([]byte(`{"files": [`))
		rw.(http.Flusher).Flush()
		<-release
	}))
	defer srv.Close()
	defer close(release)
	done := make(chan error, 1)
	defer func(d time.Duration) { pageDeadline = d }(pageDeadline)
	pageDeadline = time.Second
	go func() {
		_, err := Index{Base: srv.URL + "/simple", Client: http.DefaultClient}.Files(context.Background(), "x", "1.0")
		done <- err
	}()
	select {
	case err := <-done:
		t.Logf("Files returned: %v", err)
	case <-time.After(10 * time.Second):
		t.Errorf("BROKE: Files still reading a stalled project page after 10s (no deadline)")
	}
}

// Class C (memory): the project page's 32 MiB cap bounds the bytes, not
// what they decode to: 32 MiB of empty file objects is 11 million Files
// (64 bytes each, and the slice grows by copying).
func TestRT37ProjectPageDecodesToGigabytes(t *testing.T) {
	const n = (maxProjectJSON - 32) / 3
	page := make([]byte, 0, maxProjectJSON)
	page = append(page, `{"files":[`...)
	for i := 0; i < n; i++ {
		page = append(page, "{},"...)
	}
	page = append(page[:len(page)-1], "]}"...)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { rw.Write(page) }))
	defer srv.Close()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Index{Base: srv.URL + "/simple", Client: srv.Client()}.Files(context.Background(), "x", "1.0")
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("page %d bytes (%d objects): %v; allocated %d MB, heap grew to %d MB", len(page), n, err, alloc>>20, after.HeapSys>>20)
	if alloc > 8*maxProjectJSON {
		t.Errorf("BROKE: a %d MiB page allocated %d MB", len(page)>>20, alloc>>20)
	}
}
