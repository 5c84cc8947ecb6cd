package reports

import (
	"encoding/json"
	"reflect"
	"testing"
)

// Every field of Receipt is decoded into the struct and never also kept in
// Extra, whatever fields the struct gains: the field names come from
// encoding/json itself (a fully set struct, encoded without its methods),
// not from a list.
func TestReceiptKnownFollowsTheStruct(t *testing.T) {
	full := receiptFields{}
	v := reflect.ValueOf(&full).Elem()
	for i := 0; i < v.NumField(); i++ {
		// Non-zero values, so omitempty fields are encoded too.
		switch f := v.Field(i); f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.String:
			f.SetString("x")
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		}
	}
	b, err := json.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	var in map[string]json.RawMessage
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatal(err)
	}
	if len(in) < 5 {
		t.Fatalf("encoded receipt fields %s: want at least the five of contract §3's summary", b)
	}
	in["launch_id"] = json.RawMessage(`"L1"`)
	b, _ = json.Marshal(in)
	var r Receipt
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	if len(r.Extra) != 1 || r.Extra["launch_id"] == nil {
		t.Errorf("Extra = %v from %s, want only launch_id", r.Extra, b)
	}
	out, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]json.RawMessage
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatalf("decode %s: %v", out, err)
	}
	if len(back) != len(in) {
		t.Errorf("re-encoded receipt %s has %d fields, want the %d of %s (a field twice, or one lost)", out, len(back), len(in), b)
	}
}
