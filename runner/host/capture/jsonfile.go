package capture

import (
	"fmt"

	"github.com/tidwall/gjson"

	"github.com/sandproof/sandproof/runner/host/hostfile"
)

// MaxJSONFileBytes caps a captured JSON file read whole for its records
// (a harness's trajectory: mini-SWE-agent's is tens of KiB for a task).
const MaxJSONFileBytes = MaxEventsBytes

// ReadJSONRecords calls fn with each element (raw JSON) of the array at the
// gjson path records of the captured JSON file at path: a harness that
// keeps its transcript as one document (a trajectory) rather than lines or
// rows. The file is opened without following a link, must be a regular
// file and is read bounded (MaxJSONFileBytes); one that is not JSON, or
// whose path is not an array, is an error wrapping ErrNoRecords. fn
// returning false stops the read. It returns the elements passed.
func ReadJSONRecords(path, records string, fn func(doc string) bool) (int, error) {
	b, err := hostfile.ReadFile(path, MaxJSONFileBytes)
	if err != nil {
		return 0, fmt.Errorf("read captured JSON %q: %w", path, err)
	}
	if !gjson.ValidBytes(b) {
		return 0, fmt.Errorf("read captured JSON %q: not JSON: %w", path, ErrNoRecords)
	}
	arr := gjson.GetBytes(b, records)
	if !arr.IsArray() {
		return 0, fmt.Errorf("read captured JSON %q: %q is not an array: %w", path, records, ErrNoRecords)
	}
	n := 0
	arr.ForEach(func(_, v gjson.Result) bool {
		n++
		return fn(v.Raw)
	})
	return n, nil
}
