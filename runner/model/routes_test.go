package model_test

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/runner/model"
	// target_test.go has a wire() of its own.
	wiretable "github.com/sandproof/sandproof/runner/wire"
)

// concrete is the path from the origin of an endpoint (below "/v1", or
// its own root): each name in braces filled, a verb after it kept.
func concrete(e wiretable.Endpoint) string {
	segs := strings.Split(e.FullPath("/v1"), "/")
	for i, s := range segs {
		if strings.HasPrefix(s, "{") {
			_, verb, _ := strings.Cut(s, "}")
			segs[i] = "fake-model" + verb
		}
	}
	return strings.Join(segs, "/")
}

// nearMisses are paths no endpoint has: a near miss of each kind of
// segment, and Gemini's paths below the wrong root or with a bad name or
// verb.
var nearMisses = []string{"/v1/files", "/v1/models/a/b", "/v1/models/", "/v1/chat", "/v1/messages/count_tokens/x",
	"/v1beta/models/:generateContent", "/v1beta/models/fake-model:generate", "/v1beta/models/a:b:generateContent",
	"/v1beta/models/a/b:generateContent", "/v1beta/models/fake-model", "/v1/models/fake-model:streamGenerateContent/x"}

// The scripted model serves exactly the wire table's routes (runner/wire):
// every endpoint with its method is answered by its handler, any other
// method or path is an unknown URL; and a call is a model call exactly
// when its endpoint is a turn.
func TestModelRoutesAreTheWireTable(t *testing.T) {
	s := start(t, model.Options{})
	paths := slices.Clone(nearMisses)
	for _, e := range wiretable.Endpoints() {
		paths = append(paths, concrete(e))
	}
	served, unknowns, calls := 0, 0, 0
	for _, p := range paths {
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
			i := slices.IndexFunc(wiretable.Endpoints(), func(e wiretable.Endpoint) bool { return e.Method == m && concrete(e) == p })
			req, _ := http.NewRequest(m, "http://"+s.Addr()+p, strings.NewReader("{}"))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", m, p, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			unknown := resp.StatusCode == http.StatusNotFound && strings.Contains(string(body), `"unknown_url"`)
			if unknown == (i >= 0) {
				t.Errorf("%s %s: status %d %s; in the table: %v", m, p, resp.StatusCode, body, i >= 0)
			}
			if i < 0 {
				unknowns++
			}
			if i >= 0 {
				served++
				if wiretable.Endpoints()[i].Turn {
					calls++
				}
			}
			// A call is recorded as its handler ends, after its
			// answer went out.
			for end := time.Now().Add(10 * time.Second); len(s.Calls()) < served+unknowns && time.Now().Before(end); {
				time.Sleep(5 * time.Millisecond)
			}
			if got := s.ModelCalls(); got != calls {
				t.Errorf("%s %s: %d model calls, want %d", m, p, got, calls)
			}
		}
	}
	// Positive control: every endpoint was probed.
	if served != len(wiretable.Endpoints()) || calls == 0 {
		t.Errorf("%d probes served, %d counted; the table has %d endpoints", served, calls, len(wiretable.Endpoints()))
	}
}

// A format of the table the model has no file for is refused at Start,
// never served as an unknown URL.
func TestModelRefusesAFormatItDoesNotSpeak(t *testing.T) {
	saved := wiretable.Formats
	t.Cleanup(func() { wiretable.Formats = saved })
	wiretable.Formats = append(slices.Clone(saved), wiretable.Format{Name: "planted", Key: wiretable.Key{Header: "X-Planted"},
		Endpoints: []wiretable.Endpoint{{Method: http.MethodPost, Path: "/planted", Turn: true}}})
	if s, err := model.Start(model.Options{}); err == nil || !strings.Contains(err.Error(), `"planted"`) {
		if s != nil {
			s.Close()
		}
		t.Errorf("Start with a format the model does not speak: %v, want an error naming it", err)
	}
}

// One model of the list is answered as OpenAI does: the model object, or
// 404 model_not_found for an id not listed.
func TestModelGetOne(t *testing.T) {
	s := start(t, model.Options{Models: []string{"m-1"}})
	for _, c := range []struct {
		id     string
		status int
		want   string
	}{{"m-1", http.StatusOK, `"id":"m-1"`}, {"m-2", http.StatusNotFound, `"model_not_found"`}} {
		resp, err := http.Get(s.URL() + "/models/" + c.id)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(body), c.want) {
			t.Errorf("GET /v1/models/%s: %d %s, want %d with %s", c.id, resp.StatusCode, body, c.status, c.want)
		}
	}
}
