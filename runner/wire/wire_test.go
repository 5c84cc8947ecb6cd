package wire

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// problems are what makes a table unusable for routing: an endpoint twice
// (the model's mux would panic, the relay would take the first), a format
// without a name or a turn, a path that is not below the base, and a
// segment in braces that is empty or not a whole segment.
func problems(formats []Format, common []Endpoint) []string {
	var out []string
	seen := map[[2]string]bool{}
	names := map[string]bool{}
	check := func(e Endpoint) {
		k := [2]string{e.Method, e.Path}
		if seen[k] {
			out = append(out, "twice: "+e.Method+" "+e.Path)
		}
		seen[k] = true
		if e.Method != http.MethodGet && e.Method != http.MethodPost {
			out = append(out, "method "+e.Method+" of "+e.Path)
		}
		if !strings.HasPrefix(e.Path, "/") || strings.HasSuffix(e.Path, "/") || strings.Contains(e.Path, "//") {
			out = append(out, "path "+e.Path)
		}
		if e.Root != "" && (!strings.HasPrefix(e.Root, "/") || strings.HasSuffix(e.Root, "/") || strings.ContainsAny(e.Root, "{}")) {
			out = append(out, "root "+e.Root+" of "+e.Path)
		}
		for _, seg := range strings.Split(e.Path, "/") {
			_, _, verb := verbSegment(seg)
			if strings.ContainsAny(seg, "{}") && !verb && (len(seg) < 3 || seg[0] != '{' || !strings.HasSuffix(seg, "}")) {
				out = append(out, "segment "+seg+" of "+e.Path)
			}
		}
	}
	for _, f := range formats {
		if f.Name == "" || names[f.Name] {
			out = append(out, "format name "+f.Name)
		}
		names[f.Name] = true
		if f.Key.Header == "" {
			out = append(out, "format "+f.Name+" has no key header")
		}
		if !slices.ContainsFunc(f.Endpoints, func(e Endpoint) bool { return e.Turn }) {
			out = append(out, "format "+f.Name+" has no turn")
		}
		for _, e := range f.Endpoints {
			check(e)
		}
	}
	for _, e := range common {
		if e.Turn {
			out = append(out, "common endpoint "+e.Path+" is a turn")
		}
		check(e)
	}
	return out
}

func TestTableIsWellFormed(t *testing.T) {
	if len(Formats) == 0 || len(Endpoints()) != 9 {
		t.Fatalf("the table has %d formats and %d endpoints", len(Formats), len(Endpoints()))
	}
	for _, p := range problems(Formats, Common) {
		t.Error(p)
	}
}

// The check sees a broken table: each planted break is reported.
func TestTableProblemsArePlanted(t *testing.T) {
	bad := []Format{
		{Name: "a", Key: bearer, Endpoints: []Endpoint{{Method: "POST", Path: "/x", Turn: true}, {Method: "POST", Path: "/x"}}},
		{Name: "a", Endpoints: []Endpoint{{Method: "PUT", Path: "y/{}"}, {Method: "POST", Root: "v1beta/", Path: "/m/{}:v"}}},
	}
	got := problems(bad, []Endpoint{{Method: "GET", Path: "/m/{id}x", Turn: true}})
	want := []string{"twice: POST /x", "format name a", "format a has no key header", "format a has no turn",
		"method PUT of y/{}", "path y/{}", "segment {} of y/{}", "root v1beta/ of /m/{}:v", "segment {}:v of /m/{}:v",
		"common endpoint /m/{id}x is a turn", "segment {id}x of /m/{id}x"}
	if !slices.Equal(got, want) {
		t.Errorf("planted problems:\n got %q\nwant %q", got, want)
	}
}

// The key headers in the order the model reads them: OpenAI's bearer,
// then Anthropic's, then Gemini's (whose key may come in "?key=" too);
// the relay's alias is not a format's.
func TestKeys(t *testing.T) {
	got := Keys()
	want := []Key{{Header: "Authorization", Prefix: "Bearer "}, {Header: "X-Api-Key"}, {Header: "X-Goog-Api-Key", Query: "key"}}
	if !slices.Equal(got, want) {
		t.Errorf("Keys() = %q, want %q", got, want)
	}
	for _, k := range append(got, KeyAliases...) {
		if k.Header != http.CanonicalHeaderKey(k.Header) {
			t.Errorf("key header %q is not canonical", k.Header)
		}
	}
}

func TestPattern(t *testing.T) {
	for _, c := range []struct {
		e        Endpoint
		pat, mux string
	}{
		{ModelGet, "GET /v1/models/{id}", "GET /v1/models/{id}"},
		// Gemini's endpoints are below their own root, not the base, and
		// a ServeMux holds them with the verb widened into the wildcard.
		{GeminiGenerate, "POST /v1beta/models/{model}:generateContent", "POST /v1beta/models/{model}"},
		{GeminiStream, "POST /v1beta/models/{model}:streamGenerateContent", "POST /v1beta/models/{model}"},
	} {
		if got := c.e.Pattern("/v1"); got != c.pat {
			t.Errorf("Pattern = %q, want %q", got, c.pat)
		}
		if got := c.e.MuxPattern("/v1"); got != c.mux {
			t.Errorf("MuxPattern = %q, want %q", got, c.mux)
		}
	}
}

// Match reads a "{name}:verb" segment as a name and its verb, and a
// "{name}" segment as one non-empty segment; near misses do not match.
func TestMatch(t *testing.T) {
	gen := "/v1beta/models/{model}:generateContent"
	for _, c := range []struct {
		pat, path, model string
		ok               bool
	}{
		{gen, "/v1beta/models/gemini-2.5-pro:generateContent", "gemini-2.5-pro", true},
		{gen, "/v1beta/models/m:streamGenerateContent", "", false},
		{gen, "/v1beta/models/:generateContent", "", false},
		{gen, "/v1beta/models/a:b:generateContent", "", false},
		{gen, "/v1beta/models/m:generateContentX", "", false},
		{gen, "/v1beta/models/m", "", false},
		{gen, "/v1beta/models/a/m:generateContent", "", false},
		{gen, "/v1/models/m:generateContent", "", false},
		{"/models/{model}", "/models/m:generateContent", "m:generateContent", true},
		{"/models/{model}", "/models/", "", false},
		{"/models/{model}", "/models/a/b", "", false},
		{"/models", "/models", "", true},
	} {
		vals, ok := Match(c.pat, c.path)
		if ok != c.ok || vals["model"] != c.model {
			t.Errorf("Match(%q, %q) = %q, %v; want model %q, %v", c.pat, c.path, vals, ok, c.model, c.ok)
		}
	}
}
