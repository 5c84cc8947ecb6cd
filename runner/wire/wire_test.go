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
		for _, seg := range strings.Split(e.Path, "/") {
			if strings.ContainsAny(seg, "{}") && (len(seg) < 3 || seg[0] != '{' || !strings.HasSuffix(seg, "}")) {
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
	if len(Formats) == 0 || len(Endpoints()) != 6 {
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
		{Name: "a", Endpoints: []Endpoint{{Method: "PUT", Path: "y/{}"}}},
	}
	got := problems(bad, []Endpoint{{Method: "GET", Path: "/m/{id}x", Turn: true}})
	want := []string{"twice: POST /x", "format name a", "format a has no key header", "format a has no turn",
		"method PUT of y/{}", "path y/{}", "segment {} of y/{}", "common endpoint /m/{id}x is a turn", "segment {id}x of /m/{id}x"}
	if !slices.Equal(got, want) {
		t.Errorf("planted problems:\n got %q\nwant %q", got, want)
	}
}

// The key headers in the order the model reads them: OpenAI's bearer,
// then Anthropic's; the relay's alias is not a format's.
func TestKeys(t *testing.T) {
	got := Keys()
	want := []Key{{Header: "Authorization", Prefix: "Bearer "}, {Header: "X-Api-Key"}}
	if !slices.Equal(got, want) {
		t.Errorf("Keys() = %q, want %q", got, want)
	}
	for _, k := range append(got, KeyAliases...) {
		if k.Header != http.CanonicalHeaderKey(k.Header) {
			t.Errorf("key header %q is not canonical", k.Header)
		}
		if k.Query != "" {
			t.Errorf("key %q is carried in the query (%q): the relay forwards the query as it came, so it must take the key out first", k.Header, k.Query)
		}
	}
}

func TestPattern(t *testing.T) {
	if got := ModelGet.Pattern("/v1"); got != "GET /v1/models/{id}" {
		t.Errorf("ModelGet.Pattern = %q", got)
	}
}
