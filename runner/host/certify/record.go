package certify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/canary"
)

// checkRecordBounded fails a case whose record had to be cut to fit the
// record budget (reports.FitBudget).
const checkRecordBounded = "record.bounded"

// recordReserve is room kept in the budget for the checks sealing adds.
const recordReserve = 8 << 10

// sealRecord makes ev fit to be written (contract §8 evidence; the rule's
// one place on the write path, docs/threat-model.md, Records and reports),
// and returns its JSON line:
//   - every string in it (harness text included: details quoting the
//     deliverable, paths, ids, receipts' fields) holding a key in an
//     encoding of runner/host/canary is redacted there, and the case fails
//     secrets.canary naming the fields;
//   - every harness-derived list and string is bounded field by field
//     (reports.Bound with reports.DefaultCaps);
//   - a record still over reports.MaxRecordBytes is cut by
//     reports.FitBudget's rule, and the case fails record.bounded naming
//     what was cut;
//   - a line that still holds a key (a key spread over fields) keeps only
//     the case's identity, verdict and checks, redacted, and fails
//     secrets.canary.
//
// A record is never refused for what the harness put in it: the only
// error is a record whose own identity (names the run gave it) holds a
// key or is over the budget.
func sealRecord(ev *reports.Evidence, keys []string) ([]byte, error) {
	var ms []*canary.Matcher
	for _, k := range keys {
		if k != "" {
			ms = append(ms, canary.New(k))
		}
	}
	if where := redactRecord(ev, ms); len(where) > 0 {
		failCheck(ev, "secrets.canary", clauseSecrets, fmt.Sprintf("the case's record held the run's key in %s: written redacted", strings.Join(truncList(where, 8), ", ")))
	}
	ev.Bound(reports.DefaultCaps)
	if before, step, err := reports.FitBudget(ev, reports.MaxRecordBytes-recordReserve); err != nil {
		return nil, fmt.Errorf("write evidence of %s: %w", ev.CaseID, err)
	} else if step != "" {
		failCheck(ev, checkRecordBounded, clauseSecrets, fmt.Sprintf("the record was %d bytes, over the budget of %d: %s", before, reports.MaxRecordBytes, step))
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("write evidence of %s: %w", ev.CaseID, err)
	}
	if holdsKey(b, ms) {
		reports.FitBudget(ev, 0) // never fits: ends with the identity and checks only
		redactRecord(ev, ms)
		failCheck(ev, "secrets.canary", clauseSecrets, "the record held the run's key across its fields: only its identity and checks kept, redacted")
		if b, err = json.Marshal(ev); err == nil && holdsKey(b, ms) {
			err = ErrCanaryLeaked
		}
		if err != nil {
			return nil, fmt.Errorf("write evidence of %s: %w", ev.CaseID, err)
		}
	}
	return b, nil
}

func holdsKey(b []byte, ms []*canary.Matcher) bool {
	for _, m := range ms {
		if _, found := m.Find(b); found {
			return true
		}
	}
	return false
}

// failCheck fails the check id of ev (added when missing, its detail
// extended when there), and with it the case: whatever it was, a record
// that failed a check on the way to the file is failed (a skipped or
// unknown one too: what it leaked or how large it grew is a fact of this
// attempt, and the reports' judge fails a case on any failed check).
func failCheck(ev *reports.Evidence, id, clause, detail string) {
	i := -1
	for j, c := range ev.Checks {
		if c.ID == id {
			i = j
		}
	}
	if i < 0 {
		ev.Checks = append(ev.Checks, reports.Check{ID: id, Clause: clause})
		i = len(ev.Checks) - 1
	}
	c := &ev.Checks[i]
	if c.Status == reports.StatusFailed && c.Detail != "" {
		c.Detail += "; " + detail
	} else {
		c.Detail = detail
	}
	c.Status = reports.StatusFailed
	ev.Status, ev.Passed = reports.StatusFailed, false
	ev.SkipReason = ""
	setErrType(ev, "check_failed")
}

// redactRecord takes every key out of every string in ev (map keys and
// the JSON a receipt keeps as read included), in every encoding of
// runner/host/canary, and returns where it found one (JSON paths:
// "after.deliverable", "checks[verify.deliverable].detail"). It walks
// the record's type, so a field added later is walked too.
func redactRecord(ev *reports.Evidence, ms []*canary.Matcher) []string {
	if len(ms) == 0 {
		return nil
	}
	w := &redactor{ms: ms}
	w.walk(reflect.ValueOf(ev).Elem(), "")
	return w.where
}

type redactor struct {
	ms    []*canary.Matcher
	where []string
}

var rawMessageType = reflect.TypeOf(json.RawMessage(nil))

// text redacts s with every matcher, noting path when it changed.
func (w *redactor) text(s, path string) string {
	found := false
	for _, m := range w.ms {
		var hit bool
		s, hit = m.Redact(s)
		found = found || hit
	}
	if found {
		w.where = append(w.where, path)
	}
	return s
}

func (w *redactor) walk(v reflect.Value, path string) {
	switch {
	case v.Type() == rawMessageType:
		if v.Len() > 0 {
			v.SetBytes(w.json(v.Bytes(), path))
		}
		return
	}
	switch v.Kind() {
	case reflect.String:
		if s := w.text(v.String(), path); s != v.String() {
			v.SetString(s)
		}
	case reflect.Pointer:
		if !v.IsNil() {
			w.walk(v.Elem(), path)
		}
	case reflect.Struct:
		w.fields(v, path)
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			w.walk(v.Index(i), path+"["+elemName(v.Index(i), i)+"]")
		}
	case reflect.Map:
		w.mapEntries(v, path)
	}
}

// fields walks a struct's exported fields, named as JSON names them (an
// embedded struct's fields at its parent's level).
func (w *redactor) fields(v reflect.Value, path string) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			name = f.Name
		}
		p := path
		if !f.Anonymous {
			p = strings.TrimPrefix(path+"."+name, ".")
		}
		w.walk(v.Field(i), p)
	}
}

// mapEntries redacts a map's keys and values (a key that changed is
// moved to its redacted name).
func (w *redactor) mapEntries(v reflect.Value, path string) {
	if v.IsNil() {
		return
	}
	for _, k := range v.MapKeys() {
		val := reflect.New(v.Type().Elem()).Elem()
		val.Set(v.MapIndex(k))
		w.walk(val, path+"."+fmt.Sprint(k))
		nk := k
		if k.Kind() == reflect.String {
			if s := w.text(k.String(), path+" key"); s != k.String() {
				nk = reflect.ValueOf(s).Convert(k.Type())
				v.SetMapIndex(k, reflect.Value{})
			}
		}
		v.SetMapIndex(nk, val)
	}
}

// json redacts every string (keys too) of a JSON value kept as read; a
// value that is not JSON is redacted as text, as a JSON string.
func (w *redactor) json(raw []byte, path string) []byte {
	if !holdsKey(raw, w.ms) {
		return raw
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		b, _ := json.Marshal(w.text(string(raw), path))
		return b
	}
	rv := reflect.ValueOf(&v).Elem()
	w.walkAny(rv, path)
	b, err := json.Marshal(v)
	if err != nil || holdsKey(b, w.ms) {
		b, _ = json.Marshal(canary.RedactedWhole)
	}
	return b
}

// walkAny redacts a decoded JSON value in place.
func (w *redactor) walkAny(v reflect.Value, path string) {
	switch x := v.Interface().(type) {
	case string:
		v.Set(reflect.ValueOf(w.text(x, path)))
	case []any:
		for i := range x {
			w.walkAny(reflect.ValueOf(x).Index(i), path+"["+strconv.Itoa(i)+"]")
		}
	case map[string]any:
		for k, e := range x {
			val := reflect.New(reflect.TypeOf((*any)(nil)).Elem()).Elem()
			val.Set(reflect.ValueOf(&e).Elem())
			w.walkAny(val, path+"."+k)
			nk := w.text(k, path+" key")
			if nk != k {
				delete(x, k)
			}
			x[nk] = val.Interface()
		}
	}
}

// elemName names a list entry in a path: a check by its id, anything
// else by its index.
func elemName(v reflect.Value, i int) string {
	if v.Kind() == reflect.Struct {
		if f := v.FieldByName("ID"); f.IsValid() && f.Kind() == reflect.String && f.String() != "" {
			return f.String()
		}
	}
	return strconv.Itoa(i)
}
