package witness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Receipt is STATE/receipt.json as contract §3 fixes it. The
// witness keeps its own copy of the schema so that it checks the contract,
// not warden's struct.
type Receipt struct {
	Schema           string  `json:"schema"`
	WardenVersion    string  `json:"warden_version"`
	LaunchID         string  `json:"launch_id"`
	CleanupConfirmed bool    `json:"cleanup_confirmed"`
	ReturnCode       *int    `json:"return_code"`
	Signal           *string `json:"signal"`
	TimedOut         bool    `json:"timed_out"`
	Stopped          bool    `json:"stopped"`
	Error            *string `json:"error"`
	Cause            string  `json:"cause"`
	StartedAt        string  `json:"started_at"`
	EndedAt          string  `json:"ended_at"`
	StopSeconds      float64 `json:"stop_seconds"`
	// DeadlineSeconds is additive (a receipt of an older warden has none:
	// 0): the deadline in force when the launch ended, from started_at.
	DeadlineSeconds float64  `json:"deadline_seconds"`
	Tier            string   `json:"tier"`
	Reached         []Member `json:"reached"`
	Survivors       []Member `json:"survivors"`
	Unverified      []Member `json:"unverified"`
	Preserved       []Member `json:"preserved"`
}

// Member is one entry of a receipt's process lists.
type Member struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
	Comm      string `json:"comm"`
	Why       string `json:"why"`
}

// ID returns the member's identity.
func (m Member) ID() ID { return ID{m.PID, m.StartTime} }

// Find returns the member of list with id's identity.
func Find(list []Member, id ID) (Member, bool) {
	for _, m := range list {
		if m.ID() == id {
			return m, true
		}
	}
	return Member{}, false
}

// ReceiptFile is the receipt's name in the state dir.
const ReceiptFile = "receipt.json"

var (
	causes = map[string]bool{"exited": true, "exec_failed": true, "deadline": true, "stopped": true,
		"lease": true, "fenced": true, "refused": true}
	tiers = map[string]bool{"cgroup": true, "subreaper+pidfd": true, "subreaper+kill": true}
	whys  = map[string]bool{"group": true, "descendant": true, "orphan": true, "marker": true}
)

// ParseReceipt decodes a receipt and checks that every field of contract
// §3 is there with its type (lists are arrays, never null; the
// nullable fields are null or of their type), that cause, tier and
// reached[].why take their listed values, and that the times parse and are
// in order. Unknown fields are accepted, as readers must.
func ParseReceipt(data []byte) (*Receipt, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("receipt is not a JSON object: %w: %q", err, data)
	}
	kinds := map[string]string{
		"schema": "string", "warden_version": "string", "launch_id": "string",
		"cleanup_confirmed": "bool", "return_code": "int|null", "signal": "string|null",
		"timed_out": "bool", "stopped": "bool", "error": "string|null", "cause": "string",
		"started_at": "string", "ended_at": "string", "stop_seconds": "number", "tier": "string",
		"reached": "array", "survivors": "array", "unverified": "array", "preserved": "array",
	}
	for field, kind := range kinds {
		v, ok := raw[field]
		if !ok {
			return nil, fmt.Errorf("receipt has no %q field: %s", field, data)
		}
		if err := checkKind(v, kind); err != nil {
			return nil, fmt.Errorf("receipt field %q: %w", field, err)
		}
	}
	var r Receipt
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("decode receipt: %w", err)
	}
	if r.Schema != "warden.receipt/v1" {
		return nil, fmt.Errorf("receipt schema %q", r.Schema)
	}
	if r.WardenVersion == "" {
		return nil, fmt.Errorf("receipt has an empty warden_version")
	}
	if !causes[r.Cause] {
		return nil, fmt.Errorf("receipt cause %q is not one of section 3's", r.Cause)
	}
	if !tiers[r.Tier] && !(r.Tier == "" && (r.Cause == "fenced" || r.Cause == "refused")) {
		return nil, fmt.Errorf("receipt tier %q is not one of section 3's", r.Tier)
	}
	start, err := time.Parse(time.RFC3339Nano, r.StartedAt)
	if err != nil {
		return nil, fmt.Errorf("receipt started_at: %w", err)
	}
	end, err := time.Parse(time.RFC3339Nano, r.EndedAt)
	if err != nil {
		return nil, fmt.Errorf("receipt ended_at: %w", err)
	}
	if end.Before(start) {
		return nil, fmt.Errorf("receipt ended_at %s is before started_at %s", r.EndedAt, r.StartedAt)
	}
	if r.StopSeconds < 0 {
		return nil, fmt.Errorf("receipt stop_seconds %v < 0", r.StopSeconds)
	}
	for _, list := range [][]Member{r.Reached, r.Survivors, r.Unverified, r.Preserved} {
		for _, m := range list {
			if m.PID <= 0 || m.StartTime == 0 {
				return nil, fmt.Errorf("receipt member %+v has no (pid, start time)", m)
			}
		}
	}
	for _, m := range r.Reached {
		if !whys[m.Why] {
			return nil, fmt.Errorf("receipt reached member %+v: why %q is not one of section 3's", m, m.Why)
		}
	}
	return &r, nil
}

func checkKind(v json.RawMessage, kind string) error {
	v = bytes.TrimSpace(v)
	isNull := bytes.Equal(v, []byte("null"))
	var ok bool
	switch kind {
	case "string", "string|null":
		var s string
		ok = json.Unmarshal(v, &s) == nil && !isNull || kind == "string|null" && isNull
	case "bool":
		var b bool
		ok = !isNull && json.Unmarshal(v, &b) == nil
	case "number":
		var f float64
		ok = !isNull && json.Unmarshal(v, &f) == nil
	case "int|null":
		var i int
		ok = isNull || json.Unmarshal(v, &i) == nil
	case "array":
		ok = len(v) > 0 && v[0] == '['
		if ok {
			var ms []map[string]json.RawMessage
			ok = json.Unmarshal(v, &ms) == nil
			for _, m := range ms {
				for _, f := range []string{"pid", "start_time", "comm"} {
					if _, has := m[f]; !has {
						return fmt.Errorf("member %v has no %q", m, f)
					}
				}
			}
		}
	}
	if !ok {
		return fmt.Errorf("want %s, got %s", kind, v)
	}
	return nil
}

// ReadReceipt reads and checks STATE/receipt.json; a missing receipt is
// os.ErrNotExist.
func ReadReceipt(state string) (*Receipt, error) {
	data, err := os.ReadFile(filepath.Join(state, ReceiptFile))
	if err != nil {
		return nil, err
	}
	return ParseReceipt(data)
}

// Detached is what supervise --detach prints (contract §2).
type Detached struct {
	LaunchID      string `json:"launch_id"`
	SupervisorPID int    `json:"supervisor_pid"`
	State         string `json:"state"`
}

// ParseDetached decodes supervise --detach's one line of output.
func ParseDetached(stdout string) (Detached, error) {
	var d Detached
	line := strings.TrimSpace(stdout)
	if strings.Contains(line, "\n") {
		return d, fmt.Errorf("supervise --detach printed more than one line: %q", stdout)
	}
	if err := json.Unmarshal([]byte(line), &d); err != nil {
		return d, fmt.Errorf("supervise --detach output %q: %w", stdout, err)
	}
	if d.LaunchID == "" || d.SupervisorPID <= 0 || d.State == "" {
		return d, fmt.Errorf("supervise --detach output %q lacks launch_id, supervisor_pid or state", stdout)
	}
	return d, nil
}
