package receipt

import (
	"encoding/json"
	"testing"
)

// FuzzParse: the receipt reader never panics; what it accepts has the schema
// and survives a round trip.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"schema":"warden.receipt/v1","cause":"exited","return_code":0,"reached":[{"pid":1,"start_time":2,"comm":"x) S","why":"orphan"}]}`))
	f.Add([]byte(`{"schema":"warden.receipt/v1","return_code":null,"signal":"TERM","future":{"a":[1]}}`))
	f.Add([]byte(`{"schema":"warden.receipt/v1","return_code":1e999}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse(data)
		if err != nil {
			return
		}
		if r.Schema != Schema {
			t.Fatalf("accepted schema %q", r.Schema)
		}
		out, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if _, err := Parse(out); err != nil {
			t.Fatalf("round trip: %v", err)
		}
	})
}
