package main

// Pkg is one package of the host path: where its files are, and the tests
// a mutant run leaves out (a -skip pattern) beyond -short and the engine.
type Pkg struct {
	Dir  string
	Skip string
}

// Packages are the host-path packages the catalogue mutates, by short name.
var Packages = map[string]Pkg{
	"certify": {Dir: "runner/certify"},
	"capture": {Dir: "runner/capture"},
	"relay":   {Dir: "runner/relay"},
	"probe":   {Dir: "runner/probe"},
	"reports": {Dir: "reports"},
	// A 1 s harness deadline that a loaded machine can miss before the
	// harness prints its partial line; it guards no catalogued rule.
	"session": {Dir: "runner/session", Skip: "^TestLocalTimedOutRunKeepsPartialOutput$"},
	"agent":   {Dir: "runner/agent"},
}

// Mutant is one one-line bug of the kind a careful developer commits in a
// refactor: Old (exactly once in File) becomes New. Rule is the verdict
// rule it breaks, which a test must guard. Equivalent, when set, says in
// one line why the mutant cannot change behaviour; it may then survive.
type Mutant struct {
	Name       string
	Pkg        string
	File       string
	Old, New   string
	Rule       string
	Equivalent string
}

// Catalog is every host-path mutant, on the files that decide a check, a
// status or a regression. runner/certify/proof.go is left to the loop
// proof's own tests while it is being rewritten as a chain (issue 25).
var Catalog = []Mutant{
	// certify: the case's judge.
	{Name: "judge-unknown-passes", Pkg: "certify", File: "runner/certify/case.go",
		Old: "if c.Status != reports.StatusPassed {", New: "if c.Status == reports.StatusFailed {",
		Rule: "a case with an unknown check and no failed one is not passed"},
	{Name: "judge-no-checks", Pkg: "certify", File: "runner/certify/case.go",
		Old: "if len(ev.Checks) == 0 {", New: "if len(ev.Checks) < 0 {",
		Rule: "a case with no check is unknown, never passed"},
	{Name: "judge-interrupt-hides-failure", Pkg: "certify", File: "runner/certify/case.go",
		Old: "failed = failed || c.Status == reports.StatusFailed", New: "failed = failed && c.Status == reports.StatusFailed",
		Rule: "an interrupted case whose check failed on its own is failed, not unknown"},
	{Name: "judge-skip-passes", Pkg: "certify", File: "runner/certify/case.go",
		Old: "\t\tev.Passed = false\n\t\treturn", New: "\t\tev.Passed = true\n\t\treturn",
		Rule: "a skipped case's passed field is false"},

	// certify: verify (the fs diff, the markers, the deliverable, the processes).
	{Name: "fsdiff-prefix-sibling", Pkg: "certify", File: "runner/certify/verify.go",
		Old: "if p == a || strings.HasPrefix(p, a+\"/\") ||", New: "if p == a || strings.HasPrefix(p, a) ||",
		Rule: "a path beside an allowed one (/task2 for /task) is a change"},
	{Name: "fsdiff-deleted-ancestor", Pkg: "certify", File: "runner/certify/verify.go",
		Old: "isAllowed(c.Path, allowed, c.Kind != provider.ChangeDeleted)", New: "isAllowed(c.Path, allowed, true)",
		Rule: "deleting a directory above an allowed path is a change"},
	{Name: "fsdiff-ancestor-any", Pkg: "certify", File: "runner/certify/verify.go",
		Old: "strings.HasPrefix(a, p+\"/\"))", New: "strings.HasPrefix(a, p))",
		Rule: "only a directory on the way to an allowed path is allowed, not one that shares its prefix"},
	{Name: "fsdiff-unknown-passes", Pkg: "certify", File: "runner/certify/verify.go",
		Old: "Status: reports.StatusUnknown, Clause: clauseVerify,", New: "Status: reports.StatusPassed, Clause: clauseVerify,",
		Rule: "a filesystem diff nobody could read is unknown"},
	{Name: "marker-content-ignored", Pkg: "certify", File: "runner/certify/verify.go",
		Old: "if !m.Missing && m.Error == \"\" && m.SHA256 == b.SHA256 && !b.Missing {", New: "if !m.Missing && m.Error == \"\" && !b.Missing {",
		Rule: "a marker whose content changed is lost"},
	{Name: "marker-unread-kept", Pkg: "certify", File: "runner/certify/verify.go",
		Old: "len(after.MarkersKept) == len(markers) && len(after.MarkersLost) == 0,", New: "len(after.MarkersLost) == 0,",
		Rule: "a marker the after snapshot does not report is not kept"},
	{Name: "marker-read-error-kept", Pkg: "certify", File: "runner/certify/verify.go",
		Old: "if !m.Missing && m.Error == \"\" && m.SHA256 == b.SHA256", New: "if !m.Missing && m.SHA256 == b.SHA256",
		Rule: "a marker that could not be read after close is lost"},
	{Name: "shellwrite-short", Pkg: "certify", File: "runner/certify/verify.go",
		Old: "len(got) >= 8 &&", New: "len(got) >= 0 &&",
		Rule: "a shell write proves delivery only with at least 8 bytes (an empty file is in every command)"},
	{Name: "shellwrite-reversed", Pkg: "certify", File: "runner/certify/verify.go",
		Old: "strings.Contains(proof.wantIn, string(got))", New: "strings.Contains(string(got), proof.wantIn)",
		Rule: "a shell write's file content must be found in the command, not the command in the file"},
	{Name: "session-dir-unreported", Pkg: "certify", File: "runner/certify/verify.go",
		Old: "gone := ok && sm.Missing", New: "gone := !ok || sm.Missing",
		Rule: "a session dir the probe did not report on is not removed"},
	{Name: "new-process-one-allowed", Pkg: "certify", File: "runner/certify/verify.go",
		Old: "check(\"verify.no_new_processes\", len(diff.NewProcesses) == 0,", New: "check(\"verify.no_new_processes\", len(diff.NewProcesses) <= 1,",
		Rule: "one new live process fails verify.no_new_processes"},
	{Name: "tools-os-ignored", Pkg: "certify", File: "runner/certify/verify.go",
		Old: "c.What == \"python3\" || c.What == \"bash\" || c.What == \"os\"", New: "c.What == \"python3\" || c.What == \"bash\"",
		Rule: "a changed os-release fails verify.tools_unchanged"},
	{Name: "verifier-always-passed", Pkg: "certify", File: "runner/certify/verify.go",
		Old: "ev.VerifierPassed = !failed", New: "ev.VerifierPassed = true",
		Rule: "verifier_passed is false when a verify check failed"},
	{Name: "deliverable-missing-present", Pkg: "certify", File: "runner/certify/verify.go",
		Old: "present := ok && !dm.Missing && dm.Error == \"\"", New: "present := ok && dm.Error == \"\"",
		Rule:       "a deliverable the probe found missing is not delivered",
		Equivalent: "a missing entry has no sha256, which never equals a content's, and its download fails, so the shell-write path needs err == nil too"},

	// capture: the response status and the result rules.
	{Name: "status-exit-ignored", Pkg: "capture", File: "runner/capture/judge.go",
		Old: "case o.Failure, returnCode != nil && *returnCode != 0:", New: "case o.Failure:",
		Rule: "a harness that exited non-zero is failed whatever its records say"},
	{Name: "status-success-unmatched", Pkg: "capture", File: "runner/capture/judge.go",
		Old: "case len(r.Success) > 0 && o.Success:", New: "case len(r.Success) > 0:",
		Rule: "success rules that matched nothing leave the response incomplete"},
	{Name: "status-unknown-exit", Pkg: "capture", File: "runner/capture/judge.go",
		Old: "case len(r.Success) == 0 && returnCode != nil:", New: "case len(r.Success) == 0:",
		Rule: "with no success rules, an unknown exit status is incomplete, not completed"},
	{Name: "status-failure-last", Pkg: "capture", File: "runner/capture/judge.go",
		Old: "if !j.out.Failure && ru.Message != \"\" {", New: "if ru.Message != \"\" {",
		Rule: "the first failure's message is kept"},
	{Name: "match-value-ignored", Pkg: "capture", File: "runner/capture/judge.go",
		Old: "if !v.Exists() || (c.Value != \"*\" && v.String() != c.Value) {", New: "if !v.Exists() {",
		Rule: "a rule's condition matches only its value"},
	{Name: "usage-gap-hidden", Pkg: "capture", File: "runner/capture/judge.go",
		Old: "if len(j.r.Usage) > 0 && len(out.Observations) == 0 {", New: "if len(j.r.Usage) > 0 && len(out.Observations) < 0 {",
		Rule: "usage rules that matched no record are a usage gap"},

	// relay: what counts as a model call.
	{Name: "modelcall-any-method", Pkg: "relay", File: "runner/relay/relay.go",
		Old: "if req.Method == http.MethodPost && !strings.HasSuffix(req.URL.Path, \"/count_tokens\") {", New: "if !strings.HasSuffix(req.URL.Path, \"/count_tokens\") {",
		Rule: "a GET (GET /v1/models) is not a model call"},
	{Name: "modelcall-count-tokens", Pkg: "relay", File: "runner/relay/relay.go",
		Old: "if req.Method == http.MethodPost && !strings.HasSuffix(req.URL.Path, \"/count_tokens\") {", New: "if req.Method == http.MethodPost {",
		Rule: "Anthropic's count_tokens is not a model call"},
	{Name: "modelcalls-unsequenced", Pkg: "relay", File: "runner/relay/relay.go",
		Old: "if c.Seq > 0 {", New: "if c.Seq >= 0 {",
		Rule: "ModelCalls counts model requests only"},
	{Name: "relay-missing-key", Pkg: "relay", File: "runner/relay/relay.go",
		Old: "if c.Auth == \"wrong\" || c.Auth == \"missing\" {", New: "if c.Auth == \"wrong\" {",
		Rule: "a request without the case's key is refused, never passed on"},

	// probe: the reading of process states and the diff.
	{Name: "probe-stopped-dead", Pkg: "probe", File: "runner/probe/diff.go",
		Old: "if p.State == \"Z\" || p.State == \"X\" {", New: "if p.State == \"Z\" || p.State == \"X\" || p.State == \"T\" {",
		Rule: "a new process left stopped (state T, what warden's hold leaves) is a new process"},
	{Name: "probe-dead-x-alive", Pkg: "probe", File: "runner/probe/diff.go",
		Old: "if p.State == \"Z\" || p.State == \"X\" {", New: "if p.State == \"Z\" {",
		Rule: "a process in state X (dead) is not a live new process"},
	{Name: "probe-self-reused", Pkg: "probe", File: "runner/probe/diff.go",
		Old: "(self.StartTime == 0 || self.StartTime == p.StartTime)", New: "(true)",
		Rule: "the probe leaves out itself, not another process that has its pid"},
	{Name: "probe-pid-only", Pkg: "probe", File: "runner/probe/proc.go",
		Old: "return witness.ID{PID: p.PID, StartTime: p.StartTime}", New: "return witness.ID{PID: p.PID}",
		Rule: "a baseline pid reused by a new process counts as new"},
	{Name: "probe-clean-ignores-changes", Pkg: "probe", File: "runner/probe/diff.go",
		Old: "r.Clean = len(r.NewProcesses) == 0 && len(r.Changes) == 0", New: "r.Clean = len(r.NewProcesses) == 0",
		Rule: "a report with a change is not clean"},
	{Name: "probe-tool-sha-ignored", Pkg: "probe", File: "runner/probe/diff.go",
		Old: "add(\"sha256\", b.SHA256, a.SHA256)", New: "add(\"sha256\", b.SHA256, b.SHA256)",
		Rule: "a tool binary replaced under the same path and version is a change"},
	{Name: "probe-marker-size-only", Pkg: "probe", File: "runner/probe/diff.go",
		Old: "return fmt.Sprintf(\"sha256=%s size=%d\", m.SHA256, m.Size)", New: "return fmt.Sprintf(\"size=%d\", m.Size)",
		Rule: "a marker rewritten with the same size is a change"},
	{Name: "probe-state-made-up", Pkg: "probe", File: "runner/probe/proc.go",
		Old: "State: string(st.State), UID: -1}", New: "State: \"S\", UID: -1}",
		Rule: "the probe reports each process's state from its stat"},

	// reports: diff and merge, and the statuses they rest on.
	{Name: "diff-unknown-not-regression", Pkg: "reports", File: "reports/diff.go",
		Old: "case oc.Status == StatusPassed && n.Status != StatusPassed:", New: "case oc.Status == StatusPassed && n.Status == StatusFailed:",
		Rule: "passed -> unknown or skipped is a regression (a CI gate exits 1)"},
	{Name: "diff-missing-allowed", Pkg: "reports", File: "reports/diff.go",
		Old: "if oc.Status == StatusPassed && !o.AllowMissing {", New: "if oc.Status == StatusPassed && o.AllowMissing {",
		Rule: "a passed case missing from NEW is a regression unless --allow-missing"},
	{Name: "diff-fix-from-failed-only", Pkg: "reports", File: "reports/diff.go",
		Old: "case oc.Status != StatusPassed && n.Status == StatusPassed:", New: "case oc.Status == StatusFailed && n.Status == StatusPassed:",
		Rule: "unknown or skipped -> passed is a fix"},
	{Name: "diff-pair-without-task", Pkg: "reports", File: "reports/diff.go",
		Old: "return c.Image + \"\\x00\" + c.Harness + \"\\x00\" + c.TaskID", New: "return c.Image + \"\\x00\" + c.Harness",
		Rule: "cases pair by image, harness and task"},
	{Name: "diff-still-not-passed", Pkg: "reports", File: "reports/diff.go",
		Old: "\t\t\tif n.Status != StatusPassed {\n\t\t\t\td.StillNotPassed++", New: "\t\t\tif n.Status == StatusFailed {\n\t\t\t\td.StillNotPassed++",
		Rule: "an unchanged unknown or skipped case is still not passed"},
	{Name: "merge-first-attempt", Pkg: "reports", File: "reports/merge.go",
		Old: "!ok || e.AttemptNumber() > prev.AttemptNumber() {", New: "!ok || e.AttemptNumber() < prev.AttemptNumber() {",
		Rule: "merge keeps a case's last attempt"},
	{Name: "merge-equal-attempt", Pkg: "reports", File: "reports/merge.go",
		Old: "!ok || e.AttemptNumber() > prev.AttemptNumber() {", New: "!ok || e.AttemptNumber() >= prev.AttemptNumber() {",
		Rule:       "merge keeps a case's last attempt",
		Equivalent: "the same attempt twice is refused on the line above, so >= and > never see equal attempts"},
	{Name: "merge-no-matrix-hash", Pkg: "reports", File: "reports/merge.go",
		Old: "if e.Shard == \"\" || e.MatrixSHA256 == \"\" {", New: "if e.Shard == \"\" {",
		Rule: "a record without matrix_sha256 is not a shard's"},
	{Name: "merge-case-count", Pkg: "reports", File: "reports/merge.go",
		Old: "} else if e.MatrixSHA256 != matrix || e.MatrixCases != cases {", New: "} else if e.MatrixSHA256 != matrix {",
		Rule: "shards that disagree on the matrix's case count are refused"},
	{Name: "merge-short-matrix", Pkg: "reports", File: "reports/merge.go",
		Old: "if len(out) != cases {", New: "if len(out) > cases {",
		Rule: "a merge with fewer cases than the matrix is refused"},
	{Name: "merge-missing-shard", Pkg: "reports", File: "reports/merge.go",
		Old: "if len(missing) > 0 {", New: "if len(missing) > 1 {",
		Rule: "one missing shard is refused"},
	{Name: "counts-unknown-passes", Pkg: "reports", File: "reports/result.go",
		Old: "case c.Unknown > 0:", New: "case c.Unknown > 1:",
		Rule: "a run with one unknown case is unknown"},
	{Name: "judge-record-unknown-check", Pkg: "reports", File: "reports/result.go",
		Old: "case len(unknown) > 0:", New: "case len(unknown) > 1:",
		Rule: "a record saying passed with one unknown check is unknown"},
	{Name: "judge-record-passed-field", Pkg: "reports", File: "reports/result.go",
		Old: "case !e.Passed:", New: "case e.Passed && !e.Passed:",
		Rule: "a record saying passed with passed false is failed"},
	{Name: "judge-record-all-skipped", Pkg: "reports", File: "reports/result.go",
		Old: "case passed == 0:", New: "case passed < 0:",
		Rule: "a record saying passed whose checks were all skipped is unknown"},

	// session: close requires a confirmed receipt.
	{Name: "close-unconfirmed-ok", Pkg: "session", File: "runner/session/close.go",
		Old: "if !rec.CleanupConfirmed {", New: "if !rec.CleanupConfirmed && rec.ReturnCode == nil {",
		Rule: "close fails on a receipt that does not confirm cleanup, whatever the return code"},
	{Name: "install-unconfirmed-ok", Pkg: "session", File: "runner/session/session.go",
		Old: "if !r.Receipt.CleanupConfirmed || r.Receipt.ReturnCode == nil || *r.Receipt.ReturnCode != 0 {", New: "if r.Receipt.ReturnCode == nil || *r.Receipt.ReturnCode != 0 {",
		Rule: "an install whose cleanup is not confirmed fails the session"},
	{Name: "unconfirmed-no-receipt", Pkg: "session", File: "runner/session/launch.go",
		Old:  "func decodeReceipt(cmd, state string, r provider.ExecResult) (int, *receipt.Receipt, []byte, error) {\n\tswitch r.ExitCode {\n\tcase wardenConfirmed, wardenNotConfirmed:",
		New:  "func decodeReceipt(cmd, state string, r provider.ExecResult) (int, *receipt.Receipt, []byte, error) {\n\tswitch r.ExitCode {\n\tcase wardenConfirmed:",
		Rule: "warden's exit 1 carries a receipt (not confirmed), which close reports as such"},

	// agent: the root confinement of put and get.
	{Name: "agent-root-prefix", Pkg: "agent", File: "runner/agent/server.go",
		Old: "if real != rr && !strings.HasPrefix(real, rr+string(filepath.Separator)) {", New: "if real != rr && !strings.HasPrefix(real, rr) {",
		Rule: "a path whose parent resolves to a sibling of the root (root2 for root) leaves the root"},
	{Name: "agent-root-links", Pkg: "agent", File: "runner/agent/server.go",
		Old: "if srv.root == \"/\" || hp == srv.root {", New: "if srv.root == \"/\" || strings.HasPrefix(hp, srv.root) {",
		Rule: "a path through a link out of the root is refused"},
	{Name: "agent-put-symlink", Pkg: "agent", File: "runner/agent/server.go",
		Old: "if h.Typeflag != tar.TypeDir && h.Typeflag != tar.TypeReg {", New: "if h.Typeflag != tar.TypeDir && h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeSymlink {",
		Rule: "put refuses a tar entry that is not a directory or a regular file"},
}
