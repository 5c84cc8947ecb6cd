package reports

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// Schema is the value of the "schema" field of every evidence record.
const Schema = "sandproof.evidence/v1"

// ErrInvalidEvidence is wrapped by every error Validate returns, so callers
// can tell a malformed record from an I/O failure.
var ErrInvalidEvidence = errors.New("invalid evidence")

// Status is the outcome of a case, a check or a run.
type Status string

// The four statuses. Unknown is what anything is until evidence proves
// otherwise; it is never treated as passed.
const (
	StatusPassed  Status = "passed"
	StatusFailed  Status = "failed"
	StatusSkipped Status = "skipped"
	StatusUnknown Status = "unknown"
)

// Valid reports whether s is one of the four statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusPassed, StatusFailed, StatusSkipped, StatusUnknown:
		return true
	}
	return false
}

// Stage names of the case protocol (contract §7), in protocol order.
const (
	StageSetup      = "setup"
	StageSeed       = "seed"
	StageActivation = "activation"
	StageClose      = "close"
	StageVerify     = "verify"
	StageTeardown   = "teardown"
)

// StageNames lists the stage names a record may carry, in protocol order.
var StageNames = []string{StageSetup, StageSeed, StageActivation, StageClose, StageVerify, StageTeardown}

// Evidence is one case's record: one line of evidence.jsonl. The field names
// are fixed by contract §8 and BACKGROUND.md; readers ignore fields
// they do not know, so later versions can add fields without breaking them.
type Evidence struct {
	Schema string `json:"schema"`
	RunID  string `json:"run_id"`
	CaseID string `json:"case_id"`
	// TaskID names the task when the case comes from a task set; empty otherwise.
	TaskID string `json:"task_id,omitempty"`
	// Attempt numbers the runs of one case in one run: 1 for the first,
	// one more for each --resume that ran it again (added to v1; 0, a
	// record written before the field, means 1). Readers use the last
	// attempt of a case (contract §8 attempts and interrupts).
	Attempt int `json:"attempt"`
	// Interrupted says why a signal cut the case short ("SIGINT during
	// activation"); such a case is unknown and --resume runs it again.
	// Empty when it was not interrupted (added to v1).
	Interrupted string `json:"interrupted,omitempty"`
	// Infrastructure is the engine's own word on how it failed the case
	// ("the engine at unix:///run/docker.sock does not answer: ...
	// (activation)"), asked after a provider error: such a case is unknown
	// unless a check failed on its own, the run exits 3, and --resume runs
	// it again. Empty when the engine did not fail it (added to v1).
	Infrastructure string `json:"infrastructure,omitempty"`
	// Shard is "i/N" when the record comes from one slice of a sharded
	// run (certify --shard), empty otherwise. MatrixSHA256 digests the
	// whole run's image x adapter matrix (every case's id, adapter digest
	// and image reference) and MatrixCases counts its cases: shards of one
	// run agree on both, and `report merge` checks that they do (added to
	// v1; empty in records written before).
	Shard string `json:"shard,omitempty"`
	// ShardRunID is the run id a merged record had in its shard's run
	// (`report merge` gives every record the merged run's id).
	ShardRunID   string `json:"shard_run_id,omitempty"`
	MatrixSHA256 string `json:"matrix_sha256,omitempty"`
	MatrixCases  int    `json:"matrix_cases,omitempty"`
	Harness      string `json:"harness"`
	Image        string `json:"image"`
	// Scenario names the flow the case drove the harness through
	// (contract §7.6 scenarios: "challenge", "timeout", "cancel",
	// "model-429", "model-400", "borrowed"). Empty, in a record written
	// before the field, means "challenge"; the challenge case keeps the
	// case id it had before scenarios, so histories continue (added to v1).
	Scenario string `json:"scenario,omitempty"`
	// LaunchDeadlineSeconds is the deadline warden was given for the
	// activation launch (the scenario's own deadline, or the adapter's),
	// so a report can show where it fell; 0, in a record written before
	// the field, means unknown (added to v1).
	LaunchDeadlineSeconds float64 `json:"launch_deadline_seconds,omitempty"`
	ImageID               string  `json:"image_id"`

	// Status is what the writer concluded; the report recomputes it from the
	// checks and never trusts a "passed" without them.
	Status Status `json:"status"`
	// SkipReason says why a skipped case was skipped (a requirement the image
	// lacks); required when Status is skipped.
	SkipReason string `json:"skip_reason,omitempty"`
	Passed     bool   `json:"passed"`

	SeedSeconds     float64        `json:"seed_seconds"`
	Seconds         float64        `json:"seconds"`
	ModelCalls      int            `json:"model_calls"`
	ResponseStatus  string         `json:"response_status"`
	OutputItemTypes map[string]int `json:"output_item_types"`

	// ActivationReceipt and CloseReceipt are nil when no receipt was obtained
	// (a skipped case, or a provider error before launch).
	ActivationReceipt *Receipt `json:"activation_receipt"`
	CloseReceipt      *Receipt `json:"close_receipt"`

	SessionClosed                 bool     `json:"session_closed"`
	CloseObservationRecords       int      `json:"close_observation_records"`
	CloseObservationGaps          []string `json:"close_observation_gaps"`
	RecordedEventLines            int      `json:"recorded_event_lines"`
	AdapterSessionDirRemoved      bool     `json:"adapter_session_dir_removed"`
	VerifierPassed                bool     `json:"verifier_passed"`
	OwnerTeardownContainerRemoved bool     `json:"owner_teardown_container_removed"`
	// ErrorType classifies the failure (provider_error, timeout, ...); nil
	// when there was none.
	ErrorType *string `json:"error_type"`

	Before *Before `json:"before"`
	After  *After  `json:"after"`

	// Captures (added to v1, contract §8 "captured files are data").
	// CaptureBytes is what the case's captures wrote on the host; zero
	// when nothing was captured.
	CaptureBytes int64 `json:"capture_bytes,omitempty"`
	// CaptureEntries counts the archive entries the case's captures took
	// (files, directories, links and specials, created or recorded)
	// against the per-case entry cap; zero when nothing was captured.
	CaptureEntries int `json:"capture_entries,omitempty"`
	// CapturesWithheld lists what the host copies do not hold as the
	// sandbox had it (links recorded, never followed; specials; files
	// cut at a cap); nil when nothing was withheld.
	CapturesWithheld []Withheld `json:"captures_withheld,omitempty"`
	// CapturesWithheldOmitted counts withheld entries not listed (the
	// list keeps at most 100).
	CapturesWithheldOmitted int `json:"captures_withheld_omitted,omitempty"`
	// EventsOversizedLines counts events lines longer than the reader's
	// cap, skipped.
	EventsOversizedLines int `json:"events_oversized_lines,omitempty"`

	Checks []Check `json:"checks"`
	Stages []Stage `json:"stages"`

	// The decisive lines of a case that did not pass (added to v1;
	// contract §9 reports). CaseDir is the case's files relative to the
	// run directory ("cases/debian-12__pi"); empty when unknown.
	CaseDir string `json:"case_dir,omitempty"`
	// RunnerSaid is warden's runner's own line about the harness it ran
	// (a missing ELF interpreter, say); empty when it said nothing.
	RunnerSaid string `json:"runner_said,omitempty"`
	// HarnessStderrTail and HarnessStdoutTail are the last lines the
	// harness wrote (at most TailLines lines and TailBytes bytes each,
	// made Printable, withheld whole when they hold the run's key); nil
	// for a passed case or when it wrote nothing.
	HarnessStderrTail []string `json:"harness_stderr_tail,omitempty"`
	HarnessStdoutTail []string `json:"harness_stdout_tail,omitempty"`

	// Sandbox is the case container's network mode and the limits the
	// engine applied to it; nil when no container was made (added to v1).
	Sandbox *Sandbox `json:"sandbox,omitempty"`

	// ModelSteps is the bounded summary of the relay's transcript: what
	// the model was asked and answered, and where the challenge round
	// trip happened; nil when no relay ran (added to v1).
	ModelSteps *ModelSteps `json:"model_steps,omitempty"`

	// Provenance is flattened into the record: the contract (§8) names its fields at
	// the top level (warden_sha256, adapter_sha256, ...).
	Provenance

	// Line is the 1-based line the record was read from; zero when it was
	// not read from a file. It is not part of the record.
	Line int `json:"-"`
}

// Provenance says what produced a record: which binaries, which suite, on
// which host, and when.
type Provenance struct {
	WardenSHA256  string    `json:"warden_sha256"`
	AdapterSHA256 string    `json:"adapter_sha256"`
	SuiteVersion  string    `json:"suite_version"`
	StartedAt     time.Time `json:"started_at,omitzero"`
	EndedAt       time.Time `json:"ended_at,omitzero"`
	Host          string    `json:"host"`
	// HarnessRuntime says what was certified: the runtime's package,
	// version and integrity (or each file's digest), the runtime tree's
	// digest and the CLI's own version output; nil when unknown (added to
	// v1).
	HarnessRuntime *HarnessRuntime `json:"harness_runtime,omitempty"`
}

// HarnessRuntime is the provenance of an adapter's harness (contract
// §8).
type HarnessRuntime struct {
	// Package, Version and Integrity come from the adapter's npm runtime;
	// empty for other runtimes.
	Package   string `json:"package,omitempty"`
	Version   string `json:"version,omitempty"`
	Integrity string `json:"integrity,omitempty"`
	// Preparer names the runtime's preparer ("npm", "go-build");
	// empty for a files-only runtime.
	Preparer string `json:"preparer,omitempty"`
	// Files are the sha256 of each file of a `files:` runtime.
	Files []Digest `json:"files,omitempty"`
	// TreeSHA256 digests the prepared runtime tree: every path, type,
	// mode, and content (or link target), in path order; empty when the
	// adapter has no runtime dir.
	TreeSHA256 string `json:"tree_sha256,omitempty"`
	// TreeFiles counts the regular files hashed.
	TreeFiles int `json:"tree_files,omitempty"`
	// Platform is what the preparer prepared for ("linux-x64"); empty
	// when the runtime does not depend on the platform.
	Platform string `json:"platform,omitempty"`
	// Node is the Node copied into the runtime (a JS entry of the npm
	// preparer): the host's, or npm's build the manifest pins (its
	// Source says which), left out of TreeSHA256 so the tree hashes the
	// same on every host.
	Node *HostBinary `json:"node,omitempty"`
	// Python is the CPython that runs a python-kind runtime's entry: its
	// version, source ("debian": From names the package) and the sha256
	// of its pinned .debs.
	Python *HostBinary `json:"python,omitempty"`
	// GlibcLayer is the host's glibc the runtime carried into an image
	// without glibc (absent when it carried none).
	GlibcLayer *GlibcLayer `json:"glibc_layer,omitempty"`
	// CLIVersion is the first line of the CLI's own version output, run
	// under warden with a deadline; empty when not run.
	CLIVersion string `json:"cli_version,omitempty"`
	// CLIVersionError says why the version output is missing.
	CLIVersionError string `json:"cli_version_error,omitempty"`
	// VersionChecked says the runtime's own version check (the npm
	// preparer's version_args) ran before any case, in a throwaway
	// sandbox of the runtime's image, never on the host, and printed the
	// pinned version; VersionOutput is the first line it printed. False
	// and empty when the runtime asks for no check (added to v1).
	VersionChecked bool   `json:"version_checked,omitempty"`
	VersionOutput  string `json:"version_output,omitempty"`
}

// SetInterpreter records b as the runtime's interpreter, in the field of
// its name: "python" is a python runtime's CPython, anything else npm's
// Node (the field the schema had first).
func (h *HarnessRuntime) SetInterpreter(name string, b *HostBinary) {
	if name == "python" {
		h.Python = b
		return
	}
	h.Node = b
}

// GlibcLayer is a runtime's glibc layer: the loader written into its
// executables' PT_INTERP and the dir given as LD_LIBRARY_PATH (sandbox
// paths), each file copied from the host with its sha256, and each
// executable whose interpreter was rewritten, hashed after the edit.
type GlibcLayer struct {
	Loader  string            `json:"loader"`
	LibDir  string            `json:"lib_dir"`
	Files   []GlibcLayerFile  `json:"files"`
	Patched []GlibcLayerPatch `json:"patched"`
}

// GlibcLayerFile is a file of a glibc layer: its path in the runtime tree,
// the host file it came from, and its sha256.
type GlibcLayerFile struct {
	Path   string `json:"path"`
	Source string `json:"source"`
	SHA256 string `json:"sha256"`
}

// GlibcLayerPatch is an executable of the runtime whose interpreter was
// rewritten in place: what it was, and the file's sha256 after.
type GlibcLayerPatch struct {
	Path      string `json:"path"`
	OldInterp string `json:"old_interp"`
	SHA256    string `json:"sha256"`
}

// HostBinary is a binary of the runtime tree taken from outside its npm
// tree: the host's Node, or npm's node-linux-<arch> build the manifest
// pins (with.node_package) when the host's is not in with.node.
type HostBinary struct {
	Path    string `json:"path"`
	Version string `json:"version"`
	SHA256  string `json:"sha256"`
	// Source is "host" (From is the host path it was copied from) or
	// "npm" (From is PACKAGE@VERSION, Integrity the tarball's pinned
	// sha512); empty in evidence written before it was recorded.
	Source    string `json:"source,omitempty"`
	From      string `json:"from,omitempty"`
	Integrity string `json:"integrity,omitempty"`
}

// MaxModelSteps bounds ModelSteps.Steps; the rest are counted in Dropped.
const MaxModelSteps = 32

// ModelSteps summarises a case's model calls, as the relay saw them.
type ModelSteps struct {
	// Model is "scripted" or the upstream's base URL.
	Model string `json:"model"`
	// SandboxAuth counts the calls by the key the sandbox presented
	// ("canary", "wrong", "missing").
	SandboxAuth map[string]int `json:"sandbox_auth"`
	Steps       []ModelStep    `json:"steps"`
	Dropped     int            `json:"dropped,omitempty"`
	// The challenge round trip by call number (0: not seen), a chain
	// (contract §7.4): the answer that asked for the tool call whose
	// result carried the challenge back, the first request received whole
	// that carried that result, and the answer from then on (to a request
	// received whole at or after it) that wrote the deliverable. With no such chain AskCall is the first answer that
	// asked for any tool call before the challenge came back.
	AskCall    int `json:"ask_call"`
	ResultCall int `json:"result_call"`
	WriteCall  int `json:"write_call"`
	// AskID is the id of the tool call the chain runs through; "" when
	// there is no chain or the API gave no id.
	AskID string `json:"ask_id,omitempty"`
	// Missing names the first step of the round trip not seen, "" when
	// all were.
	Missing string `json:"missing,omitempty"`
	// Broken names the first tool result holding the challenge that
	// answers no tool call of the model's (forged, or sent before the
	// model asked); "" when there is none.
	Broken string `json:"broken,omitempty"`
}

// ModelStep is one model call.
type ModelStep struct {
	Seq    int  `json:"seq"`
	Status int  `json:"status"`
	Stream bool `json:"stream"`
	// ToolCalls names the tools the answer called; ToolCallIDs gives
	// their ids, in the same order ("" where the API gave none), omitted
	// when none has one.
	ToolCalls   []string `json:"tool_calls,omitempty"`
	ToolCallIDs []string `json:"tool_call_ids,omitempty"`
	// ToolCallsOmitted counts the answer's tool calls past the record's
	// bound (Caps.StepIDs), named in neither list (added to v1).
	ToolCallsOmitted int `json:"tool_calls_omitted,omitempty"`
	// ToolResults counts the tool results the request carried;
	// ToolResultIDs the ids of the calls they answer, omitted as
	// ToolCallIDs is; ChallengeBack says one of them held the challenge.
	ToolResults   int      `json:"tool_results"`
	ToolResultIDs []string `json:"tool_result_ids,omitempty"`
	// ToolResultIDsOmitted counts the result ids past the record's bound
	// (Caps.StepIDs): ToolResultIDs keeps the first (added to v1).
	ToolResultIDsOmitted int  `json:"tool_result_ids_omitted,omitempty"`
	ChallengeBack        bool `json:"challenge_back,omitempty"`
	// WritesDeliverable says the answer's tool call carried the
	// deliverable's content.
	WritesDeliverable bool   `json:"writes_deliverable,omitempty"`
	Text              string `json:"text,omitempty"`
	InputTokens       int    `json:"input_tokens,omitempty"`
	OutputTokens      int    `json:"output_tokens,omitempty"`
}

// Sandbox describes a case's container: its network mode and limits as
// the engine reports them (contract §8, rev 2).
type Sandbox struct {
	Network string `json:"network"`
	// Provider is the provider that made the sandbox ("docker"); Engine
	// the engine's address (unix:///var/run/docker.sock, tcp://...,
	// ssh://...), so a run across engines says which case ran where.
	Provider    string `json:"provider,omitempty"`
	Engine      string `json:"engine,omitempty"`
	PidsLimit   int64  `json:"pids_limit"`
	MemoryBytes int64  `json:"memory_bytes"`
	CPUShares   int64  `json:"cpu_shares"`
	OOMScoreAdj int    `json:"oom_score_adj"`
}

// Check is one verdict of a case, citing the contract clause it checks.
type Check struct {
	ID     string `json:"id"`
	Status Status `json:"status"`
	// Clause names the clause of docs/contract.md the check enforces ("7.4").
	Clause string `json:"clause"`
	Detail string `json:"detail"`
}

// Receipt is the summary of a warden receipt (contract §3) that the
// evidence carries. Fields sandproof does not interpret are kept in Extra so
// a record written from a full receipt round-trips without loss.
type Receipt struct {
	CleanupConfirmed bool `json:"cleanup_confirmed"`
	// ReturnCode is nil when the status is unknown; never a made-up 0.
	ReturnCode *int `json:"return_code"`
	// Error is nil when warden reported none.
	Error    *string `json:"error"`
	TimedOut bool    `json:"timed_out"`
	// Cause is warden's cause (exited, deadline, stopped, ...); empty when
	// the summary did not carry it.
	Cause string `json:"cause,omitempty"`
	// Extra holds every other field as read (launch_id, reached, survivors,
	// ...); nil when there were none.
	Extra map[string]json.RawMessage `json:"-"`
}

// receiptFields is Receipt without its methods, for plain encoding.
type receiptFields Receipt

// receiptKnown are the JSON names of Receipt's own fields, read from its
// tags, so a field added to the struct is never also kept in Extra.
var receiptKnown = jsonNames(reflect.TypeOf(receiptFields{}))

// jsonNames returns the names encoding/json gives the fields of struct
// type t (none of t's fields is embedded).
func jsonNames(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}

// DeadlineSeconds is the deadline in force when the launch ended, in
// seconds from its started_at: warden's deadline_seconds (contract §2
// deadline; sooner than launch_deadline_seconds when the owner brought it
// forward). False when the receipt has none (an older warden's, a fenced
// launch's) or it is not a positive number.
func (r *Receipt) DeadlineSeconds() (float64, bool) {
	if r == nil {
		return 0, false
	}
	var d float64
	if json.Unmarshal(r.Extra["deadline_seconds"], &d) != nil || !(d > 0) {
		return 0, false
	}
	return d, true
}

// UnmarshalJSON decodes the known fields and keeps the rest in Extra.
func (r *Receipt) UnmarshalJSON(b []byte) error {
	var k receiptFields
	if err := json.Unmarshal(b, &k); err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	for _, name := range receiptKnown {
		delete(all, name)
	}
	if len(all) == 0 {
		all = nil
	}
	*r = Receipt(k)
	r.Extra = all
	return nil
}

// MarshalJSON writes the known fields first, then Extra in key order, so the
// output is deterministic.
func (r Receipt) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(receiptFields(r))
	if err != nil {
		return nil, err
	}
	if len(r.Extra) == 0 {
		return b, nil
	}
	keys := make([]string, 0, len(r.Extra))
	for k := range r.Extra {
		if !slices.Contains(receiptKnown, k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var buf bytes.Buffer
	buf.Write(b[:len(b)-1])
	for _, k := range keys {
		name, _ := json.Marshal(k)
		buf.WriteByte(',')
		buf.Write(name)
		buf.WriteByte(':')
		if err := json.Compact(&buf, r.Extra[k]); err != nil {
			return nil, fmt.Errorf("encode receipt field %q: %w", k, err)
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// Before is what the owner's probe saw at setup.
type Before struct {
	OS string `json:"os"`
	// Python3 and Bash are "none" when absent, otherwise path, version and
	// sha256 as the probe reports them.
	Python3   string    `json:"python3"`
	Bash      string    `json:"bash"`
	Markers   []string  `json:"markers"`
	Processes []Process `json:"processes,omitempty"`
	// ProcessesOmitted counts baseline processes past the record's bound
	// (Caps.List), not listed (added to v1).
	ProcessesOmitted int `json:"processes_omitted,omitempty"`
}

// After is what the owner's probe saw at verification, after close.
type After struct {
	Deliverable string   `json:"deliverable"`
	MarkersKept []string `json:"markers_kept"`
	MarkersLost []string `json:"markers_lost"`
	Python3     string   `json:"python3"`
	Bash        string   `json:"bash,omitempty"`
	// HarnessProcesses are processes alive at verification that were not in
	// the setup baseline; any entry fails the case.
	HarnessProcesses []Process `json:"harness_processes"`
	// HarnessProcessesOmitted counts new processes past the record's
	// bound (Caps.List), not listed; each one fails the case all the same
	// (added to v1).
	HarnessProcessesOmitted int `json:"harness_processes_omitted,omitempty"`
}

// Withheld is one captured entry whose host copy differs from the
// sandbox's: Kind is symlink or hardlink (Target recorded, never created
// or followed), special (device, fifo, socket: skipped), truncated (Written
// of Size apparent bytes kept) or stopped (the download stopped here).
type Withheld struct {
	Path    string `json:"path"`
	Kind    string `json:"kind"`
	Target  string `json:"target,omitempty"`
	Size    int64  `json:"size,omitempty"`
	Written int64  `json:"written,omitempty"`
}

// Process names a process the way warden does: pid plus start time.
type Process struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
	Comm      string `json:"comm,omitempty"`
}

// Stage is one step of the case protocol on the timeline.
type Stage struct {
	Name      string    `json:"name"`
	StartedAt time.Time `json:"started_at"`
	Seconds   float64   `json:"seconds"`
}

// Bounds of a harness output tail in the evidence.
const (
	TailLines = 20
	TailBytes = 4096
)

// Tail returns the last lines of data, at most TailLines lines and
// TailBytes bytes, each made Printable (a line cut at the byte bound keeps
// its end). Trailing blank lines are dropped; nil when nothing is left.
func Tail(data []byte) []string {
	text := strings.TrimRight(strings.ToValidUTF8(string(data), "\uFFFD"), "\r\n\t ")
	if text == "" {
		return nil
	}
	lines := strings.Split(text, "\n")
	var out []string
	size := 0
	for i := len(lines) - 1; i >= 0 && len(out) < TailLines; i-- {
		l := Printable(strings.TrimSuffix(lines[i], "\r"), false)
		if size+len(l) > TailBytes {
			if len(out) == 0 {
				l = "…" + l[len(l)-(TailBytes-len("…")):]
				for !utf8.ValidString(l) {
					l = "…" + l[len("…")+1:]
				}
				out = append(out, l)
			}
			break
		}
		size += len(l) + 1
		out = append(out, l)
	}
	slices.Reverse(out)
	return out
}

// AttemptNumber is Attempt with a record written before the field read as
// attempt 1.
func (e *Evidence) AttemptNumber() int { return max(1, e.Attempt) }

// Validate reports the first thing that makes e unusable as a case record:
// a wrong schema, a missing run_id, case_id, harness or image, a status
// outside the four, a skipped case without a reason, a malformed check or
// stage, or a negative duration. Every error wraps ErrInvalidEvidence.
func (e *Evidence) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidEvidence, fmt.Sprintf(format, args...))
	}
	switch {
	case e.Schema != Schema:
		return bad("schema %q, want %q", e.Schema, Schema)
	case e.RunID == "":
		return bad("missing run_id")
	case e.CaseID == "":
		return bad("missing case_id")
	case e.Harness == "":
		return bad("case %q: missing harness", e.CaseID)
	case e.Image == "":
		return bad("case %q: missing image", e.CaseID)
	case !e.Status.Valid():
		return bad("case %q: status %q is not passed, failed, skipped or unknown", e.CaseID, e.Status)
	case e.Status == StatusSkipped && e.SkipReason == "":
		return bad("case %q: skipped without skip_reason", e.CaseID)
	case e.Attempt < 0:
		return bad("case %q: attempt %d is negative", e.CaseID, e.Attempt)
	}
	for name, v := range map[string]float64{"seconds": e.Seconds, "seed_seconds": e.SeedSeconds, "launch_deadline_seconds": e.LaunchDeadlineSeconds} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return bad("case %q: %s %v is negative", e.CaseID, name, v)
		}
	}
	seen := make(map[string]bool, len(e.Checks))
	for i, c := range e.Checks {
		if c.ID == "" {
			return bad("case %q: check %d has no id", e.CaseID, i)
		}
		if seen[c.ID] {
			return bad("case %q: check %q appears twice", e.CaseID, c.ID)
		}
		seen[c.ID] = true
		if !c.Status.Valid() {
			return bad("case %q: check %q: status %q is not passed, failed, skipped or unknown", e.CaseID, c.ID, c.Status)
		}
	}
	for _, s := range e.Stages {
		if !slices.Contains(StageNames, s.Name) {
			return bad("case %q: stage %q is not one of %v", e.CaseID, s.Name, StageNames)
		}
		if s.Seconds < 0 {
			return bad("case %q: stage %q: seconds %v is negative", e.CaseID, s.Name, s.Seconds)
		}
	}
	return nil
}

// ScenarioChallenge is the scenario of every case written before
// scenarios existed, and of a record whose scenario field is empty.
const ScenarioChallenge = "challenge"

// ScenarioName gives the case's scenario, reading an empty field (a record
// written before the field) as ScenarioChallenge.
func (e *Evidence) ScenarioName() string {
	if e.Scenario == "" {
		return ScenarioChallenge
	}
	return e.Scenario
}
