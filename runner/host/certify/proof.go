package certify

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/hostfile"
	"github.com/sandproof/sandproof/runner/host/relay"
	"github.com/sandproof/sandproof/runner/host/session"
	"github.com/sandproof/sandproof/runner/model"
)

// ChallengeFile is where the owner writes the case's challenge, readable by
// the harness user only (contract §7.1).
const ChallengeFile = TaskDir + "/challenge.txt"

// loopProof is what the relay's transcript shows of the challenge round
// trip (contract §7.2), read as a chain (§7.4).
type loopProof struct {
	steps *reports.ModelSteps
	// want is the content the write call gave the deliverable; "" when the
	// call carried no content argument (a shell command), then wantIn is
	// the command's arguments, which must contain the deliverable.
	want, wantIn string
	// writeTool names the tool of the write call.
	writeTool string
	// ask is the model's tool call the chain runs through, made in the
	// answer of call steps.AskCall; zero when there is no chain.
	ask relay.ToolCall
	// broken says why the first tool result holding the challenge that
	// answers no tool call of the model's breaks the chain; "" when every
	// one answers one.
	broken  string
	calls   int
	results int
}

// contentArgs are the argument names a write tool takes its content in.
var contentArgs = []string{"content", "contents", "text", "data", "body", "file_text"}

// writeContent returns the content argument of a tool call's JSON
// arguments, if it has one.
func writeContent(args string) (string, bool) {
	var m map[string]any
	if json.Unmarshal([]byte(args), &m) != nil {
		return "", false
	}
	for k, v := range m {
		for _, want := range contentArgs {
			if s, ok := v.(string); ok && strings.EqualFold(k, want) && s != "" {
				return s, true
			}
		}
	}
	return "", false
}

// asked is a tool call a model answer made: the call whose answer made it,
// and when that answer had been written to the harness whole (zero: never,
// relay.Call.WrittenAt).
type asked struct {
	seq int
	at  time.Time
	tc  relay.ToolCall
}

// before says the answer that asked for a had been written to the harness
// whole before request c was received whole: only then can c carry its
// result. The order is the relay's clock, not the requests' numbers: a
// request is numbered at its headers, and a harness can hold its last
// byte while another request goes round.
func (a asked) before(c relay.Call) bool {
	return !a.at.IsZero() && a.at.Before(c.ReceivedAt)
}

// analyse reads the relay's calls as a chain (contract §7.4): an answer of
// the model's asked for a tool call; a request received whole after that
// answer was written to the harness whole carries the result of that call
// (the same tool call id; where the model's call had none, the same tool
// and arguments as the call the request says it answers: a model's call
// with an id is answered by that id alone); the result holds the
// challenge; an answer to a request received from then on writes the
// deliverable. Every tool result holding the challenge must answer a call
// the model made in an answer the harness had before the request was
// whole: one that does not (a call the harness made up, or a result sent
// before the model's answer asking for it reached the harness) breaks the
// chain, even beside a true one. A retried request, carrying the same
// result again, keeps it. derived, when not empty, is the token the
// scripted model makes from the challenge: then only a call carrying it is
// the write. The steps are listed by number; the chain is read in the
// order the requests were received whole.
func analyse(calls []relay.Call, challenge, derived, modelName string) loopProof {
	sort.SliceStable(calls, func(i, j int) bool { return calls[i].Seq < calls[j].Seq })
	st := &reports.ModelSteps{Model: modelName, SandboxAuth: map[string]int{}, Steps: []reports.ModelStep{}}
	cr := chainReader{p: loopProof{steps: st}, challenge: challenge, derived: derived, byID: map[string][]asked{}, byName: map[string][]asked{},
		linked: map[string]asked{}, back: map[int]bool{}}
	cr.index(calls)
	for _, c := range arrivals(calls) {
		cr.link(c)
	}
	for _, c := range calls {
		if c.Seq != 0 {
			cr.step(c)
		}
	}
	return cr.finish()
}

// arrivals are the model calls in the order the relay received their
// requests whole (by number among equal times). A request never received
// whole carried nothing the relay read and got no answer: it is left out.
func arrivals(calls []relay.Call) []relay.Call {
	var out []relay.Call
	for _, c := range calls {
		if c.Seq != 0 && !c.ReceivedAt.IsZero() {
			out = append(out, c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ReceivedAt.Before(out[j].ReceivedAt) })
	return out
}

// chainReader is analyse's walk over the calls.
type chainReader struct {
	p                  loopProof
	challenge, derived string
	// byID and byName hold every tool call of the model's answers, by id
	// and by tool, in call order.
	byID, byName map[string][]asked
	// linked remembers the call a result (by id and claimed call) was
	// found to answer: requests are read in the order they were received
	// whole, so a later one finds at least the same.
	linked map[string]asked
	// back says which calls' requests carried the challenge back.
	back map[int]bool
	// firstBack is the first call whose request carried the challenge
	// back, anyAsk the first answer before it that asked for any tool.
	firstBack, anyAsk int
}

// index files every tool call of the model's answers.
func (r *chainReader) index(calls []relay.Call) {
	for _, c := range calls {
		if c.Seq == 0 {
			continue
		}
		for _, tc := range c.ToolCalls {
			a := asked{seq: c.Seq, at: c.WrittenAt, tc: tc}
			if tc.ID != "" {
				r.byID[tc.ID] = append(r.byID[tc.ID], a)
			}
			r.byName[tc.Name] = append(r.byName[tc.Name], a)
		}
	}
}

// link reads one request, in the order they were received whole: the
// results it carries that hold the challenge and, once the challenge came
// back, the write among its answer's tool calls.
func (r *chainReader) link(c relay.Call) {
	st := r.p.steps
	r.results(c)
	if r.anyAsk == 0 && r.firstBack == 0 && len(c.ToolCalls) > 0 {
		r.anyAsk = c.Seq
	}
	if st.ResultCall != 0 && st.WriteCall == 0 {
		r.write(c)
	}
}

// step records one model call: its status, the results its request
// carried, the tool calls its answer made, and its part in the chain.
func (r *chainReader) step(c relay.Call) {
	p, st := &r.p, r.p.steps
	p.calls++
	st.SandboxAuth[c.Auth]++
	step := reports.ModelStep{Seq: c.Seq, Status: c.Status, Stream: c.Stream, ToolResults: len(c.ToolResults),
		ChallengeBack: r.back[c.Seq], WritesDeliverable: c.Seq == st.WriteCall}
	p.results += len(c.ToolResults)
	if len(c.Text) > 80 {
		step.Text = c.Text[:80] + "…"
	} else {
		step.Text = c.Text
	}
	if c.Usage != nil {
		step.InputTokens, step.OutputTokens = c.Usage.Input, c.Usage.Output
	}
	if slices.ContainsFunc(c.ToolResultIDs, func(id string) bool { return id != "" }) {
		step.ToolResultIDs = c.ToolResultIDs
	}
	for _, tc := range c.ToolCalls {
		step.ToolCalls = append(step.ToolCalls, tc.Name)
		step.ToolCallIDs = append(step.ToolCallIDs, tc.ID)
	}
	if !slices.ContainsFunc(step.ToolCallIDs, func(id string) bool { return id != "" }) {
		step.ToolCallIDs = nil
	}
	if len(st.Steps) < reports.MaxModelSteps {
		st.Steps = append(st.Steps, step)
	} else {
		st.Dropped++
	}
}

// results links each tool result of call c's request that holds the
// challenge to the model's call it answers, or notes why the chain
// breaks there. A result without an id answers the claimed call without
// one at the same place: the k-th such result the k-th such call.
func (r *chainReader) results(c relay.Call) {
	p, st := &r.p, r.p.steps
	var idless []relay.ToolCall
	for _, tc := range c.ClaimedToolCalls {
		if tc.ID == "" {
			idless = append(idless, tc)
		}
	}
	k := 0
	for i, res := range c.ToolResults {
		id := ""
		if i < len(c.ToolResultIDs) {
			id = c.ToolResultIDs[i]
		}
		var claim *relay.ToolCall
		if id == "" {
			if k < len(idless) {
				claim = &idless[k]
			}
			k++
		} else if j := slices.IndexFunc(c.ClaimedToolCalls, func(tc relay.ToolCall) bool { return tc.ID == id }); j >= 0 {
			claim = &c.ClaimedToolCalls[j]
		}
		if r.challenge == "" || !strings.Contains(res, r.challenge) {
			continue
		}
		r.back[c.Seq] = true
		if r.firstBack == 0 {
			r.firstBack = c.Seq
		}
		if st.ResultCall != 0 && p.broken != "" {
			continue // both found: no later result changes the verdict
		}
		a, ok := r.chainLink(c, id, claim)
		if !ok {
			if p.broken == "" {
				p.broken = r.why(c, id, claim)
			}
			continue
		}
		if st.ResultCall == 0 {
			st.ResultCall, st.AskCall, st.AskID, p.ask = c.Seq, a.seq, a.tc.ID, a.tc
		}
	}
}

// write finds, once the challenge came back, the first of call c's tool
// calls that writes the deliverable: one carrying the derived token when
// there is one, else one with a content argument, else a command whose
// arguments must contain it.
func (r *chainReader) write(c relay.Call) {
	p, st := &r.p, r.p.steps
	for _, tc := range c.ToolCalls {
		content, hasContent := writeContent(tc.Arguments)
		switch {
		case r.derived != "" && !strings.Contains(tc.Arguments, r.derived):
			continue
		case hasContent:
			p.want = content
		case r.derived != "":
			p.want = r.derived
		case strings.TrimSpace(tc.Arguments) != "":
			p.wantIn = tc.Arguments
		default:
			continue
		}
		st.WriteCall, p.writeTool = c.Seq, tc.Name
		return
	}
}

// finish names the chain's first missing link.
func (r *chainReader) finish() loopProof {
	p, st := r.p, r.p.steps
	if st.AskCall == 0 {
		// No chain: the first answer that asked for any tool call before
		// the challenge came back, so the round trip's check can say the
		// harness did not run it.
		st.AskCall = r.anyAsk
	}
	st.Broken = p.broken
	switch {
	case p.calls == 0:
		st.Missing = "model call"
	case st.AskCall == 0:
		st.Missing = "tool call asking for the challenge"
	case st.ResultCall == 0:
		st.Missing = "tool result carrying the challenge"
	case st.WriteCall == 0:
		st.Missing = "write of the deliverable after the challenge"
	}
	return p
}

// chainLink finds the model's tool call that a tool result of request c
// answers, in an answer written to the harness whole before c was
// received whole: the call with the result's id; or, only where the
// model's call had no id (the result then has none, or one the harness
// named), the call with the same tool and arguments as claim, the call the
// request says the result answers. A model's call with an id is matched
// by that id alone. When the request's own history holds the call, it
// must be the model's tool, with the model's arguments.
func (r *chainReader) chainLink(c relay.Call, id string, claim *relay.ToolCall) (asked, bool) {
	key := id
	if claim != nil {
		key += "\x00" + claim.Name + "\x00" + claim.Arguments
	}
	if a, ok := r.linked[key]; ok {
		return a, true
	}
	if id != "" {
		for _, a := range r.byID[id] {
			if !a.before(c) {
				continue
			}
			if claim != nil && !sameCall(*claim, a.tc) {
				return asked{}, false
			}
			r.linked[key] = a
			return a, true
		}
	}
	if claim != nil {
		for _, a := range r.byName[claim.Name] {
			if a.tc.ID == "" && a.before(c) && sameArgs(a.tc.Arguments, claim.Arguments) {
				r.linked[key] = a
				return a, true
			}
		}
	}
	return asked{}, false
}

// why says, naming the link, why a tool result of request c (its id, the
// call its history says it answers) answers no call of the model's.
func (r *chainReader) why(c relay.Call, id string, claim *relay.ToolCall) string {
	if id != "" {
		for _, a := range r.byID[id] {
			if a.before(c) && claim != nil {
				return fmt.Sprintf("call %d's request says tool call %q was %s, but call %d's answer asked for %s",
					c.Seq, id, callText(*claim), a.seq, callText(a.tc))
			}
		}
		if as := r.byID[id]; len(as) > 0 {
			return fmt.Sprintf("call %d's request carries a result for tool call %q, which the model asked for only in call %d, %s", c.Seq, id, as[0].seq, late(as[0], c))
		}
	}
	if claim != nil {
		var withID *asked
		for _, a := range r.byName[claim.Name] {
			switch {
			case !sameArgs(a.tc.Arguments, claim.Arguments):
			case a.tc.ID == "":
				return fmt.Sprintf("call %d's request carries %s, which the model asked for only in call %d, %s",
					c.Seq, resultText(id, *claim), a.seq, late(a, c))
			case withID == nil && id == "":
				withID = &a
			}
		}
		if withID != nil {
			s := fmt.Sprintf("call %d's request carries a result (no tool call id) for %s, which the model asked for only as tool call %q in call %d (a call with an id is answered by that id alone)",
				c.Seq, callText(*claim), withID.tc.ID, withID.seq)
			if !withID.before(c) {
				s += ", " + late(*withID, c)
			}
			return s
		}
	}
	switch {
	case id != "" && claim != nil:
		return fmt.Sprintf("call %d's request carries a result for tool call %q (%s, by the request's own history), which no model answer asked for",
			c.Seq, id, callText(*claim))
	case id != "":
		return fmt.Sprintf("call %d's request carries a result for tool call %q, which no model answer asked for", c.Seq, id)
	case claim != nil:
		return fmt.Sprintf("call %d's request carries a result (no tool call id) for %s, which no model answer before it asked for", c.Seq, callText(*claim))
	}
	return fmt.Sprintf("call %d's request carries a tool result with no tool call id and no tool call of its history to answer", c.Seq)
}

// resultText names a result by its id, if it has one, and the call the
// request's history says it answers.
func resultText(id string, claim relay.ToolCall) string {
	if id == "" {
		return "a result (no tool call id) for " + callText(claim)
	}
	return fmt.Sprintf("a result for tool call %q (%s, by the request's own history)", id, callText(claim))
}

// late says when the answer asking for a reached the harness, against
// when request c was whole.
func late(a asked, c relay.Call) string {
	if a.at.IsZero() {
		return "whose answer never reached the harness whole"
	}
	return fmt.Sprintf("whose answer was written to the harness at %s, after call %d's request was complete at %s", clock(a.at), c.Seq, clock(c.ReceivedAt))
}

// clock is a time of the relay's record in a check's detail.
func clock(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format("15:04:05.000000")
}

// sameCall says a call the request's history holds is the model's: the
// same tool, and the same arguments where both are JSON (a harness may
// encode them again: key order and spacing differ; a capped or free-text
// argument is not compared).
func sameCall(claim, model relay.ToolCall) bool {
	if claim.Name != model.Name {
		return false
	}
	var a, b any
	if json.Unmarshal([]byte(claim.Arguments), &a) != nil || json.Unmarshal([]byte(model.Arguments), &b) != nil {
		return true
	}
	return reflect.DeepEqual(a, b)
}

// sameArgs compares two calls' arguments as JSON values (as texts where
// either is not JSON).
func sameArgs(x, y string) bool {
	var a, b any
	if json.Unmarshal([]byte(x), &a) != nil || json.Unmarshal([]byte(y), &b) != nil {
		return strings.TrimSpace(x) == strings.TrimSpace(y)
	}
	return reflect.DeepEqual(a, b)
}

// callText names a tool call in a check's detail: its tool and its
// arguments, capped.
func callText(tc relay.ToolCall) string {
	return fmt.Sprintf("%s %s", tc.Name, truncate(tc.Arguments, 80))
}

// loopChecks adds the round trip's checks, each naming the step it looks
// for or the link of the chain that broke.
func (cr *caseRun) loopChecks(p loopProof, derived string) {
	st := p.steps
	cr.ev.ModelSteps = st
	cr.check("verify.model_called", clauseVerify, p.calls > 0,
		"%d model call(s) through the relay%s%s", p.calls, authText(st.SandboxAuth), when(p.calls == 0, ": the harness never called the model"))
	if cr.c.scenario.Fault != model.FaultNone {
		// A harness may rightly stop at the fault, before the challenge:
		// scenario.model_fault judges whether it finished.
		return
	}
	askOK := st.AskCall > 0 && p.broken == ""
	var asked string
	switch {
	case p.broken != "":
		asked = p.broken
	case st.ResultCall > 0 && st.AskID != "":
		asked = fmt.Sprintf("call %d asked for tool call %q (%s), whose result came back in call %d", st.AskCall, st.AskID, callText(p.ask), st.ResultCall)
	case st.ResultCall > 0:
		asked = fmt.Sprintf("call %d asked for %s (no tool call id), whose result came back in call %d", st.AskCall, callText(p.ask), st.ResultCall)
	case askOK:
		asked = fmt.Sprintf("call %d: the model asked for a tool call before the challenge came back", st.AskCall)
	default:
		asked = "no model answer asked for a tool call: the model was never asked to read the challenge"
	}
	cr.check("verify.challenge_asked", clauseVerify, askOK, "%s", asked)
	why := fmt.Sprintf("the harness did not run the tool call of call %d", st.AskCall)
	switch {
	case p.broken != "":
		why = "the only results holding it answer no tool call of the model's: " + p.broken
	case st.AskCall == 0:
		why = "the model never asked for it"
	}
	cr.check("verify.challenge_round_trip", clauseVerify, st.ResultCall > 0, "%s",
		pick(st.ResultCall > 0, fmt.Sprintf("call %d carried the challenge back in the result of call %d's tool call", st.ResultCall, st.AskCall),
			fmt.Sprintf("no request carried the challenge back in the result of a tool call the model asked for (%d calls, %d tool results): %s", p.calls, p.results, why)))
	wrote := st.WriteCall > 0
	detail := "no model answer after the challenge came back wrote the deliverable"
	if wrote {
		detail = fmt.Sprintf("call %d answered with %s writing the deliverable after the challenge came back", st.WriteCall, p.writeTool)
		if derived != "" && p.want != derived {
			wrote = false
			detail += fmt.Sprintf(", but with %q, not the token derived from the challenge", truncate(p.want, 80))
		}
	}
	if cr.c.scenario.NoDeliverable {
		return // the scenario's own checks judge what came after the challenge
	}
	cr.check("verify.write_after_challenge", clauseVerify, wrote, "%s", detail)
}

// authText says which keys the sandbox presented, " (keys: canary 3)".
func authText(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	var parts []string
	for k, n := range m {
		parts = append(parts, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(parts)
	return " (keys: " + strings.Join(parts, ", ") + ")"
}

func when(ok bool, s string) string {
	if ok {
		return s
	}
	return ""
}

func pick(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return no
}

// startRelay puts the case's recording relay in front of upstream.
func startRelay(upstream, canary, upstreamKey, log string, lim relay.Limits) (*relay.Relay, error) {
	return relay.Start(relay.Options{Upstream: upstream, SandboxKey: canary, UpstreamKey: upstreamKey, LogPath: log, Limits: lim})
}

// runtimeProvenance says what an adapter's harness is: the package,
// version and integrity its preparer pins (adapter.Manifest.RuntimePins,
// named by no kind here), or each runtime file's digest, and the digest
// of the prepared tree.
func runtimeProvenance(m *adapter.Manifest, rt *adapter.Prepared) (*reports.HarnessRuntime, error) {
	h := &reports.HarnessRuntime{}
	if p := m.Runtime.Prepare; p != nil {
		h.Preparer = p.Name
		pins := m.RuntimePins()
		h.Package, h.Version, h.Integrity = pins.Package, pins.Version, pins.Integrity
	}
	for _, f := range m.Runtime.Files {
		sum, _, err := hostfile.SHA256File(f.Src)
		if err != nil {
			sum = "error: " + err.Error()
		}
		h.Files = append(h.Files, reports.Digest{Name: f.Dst, Value: sum})
	}
	if rt == nil {
		return h, nil
	}
	h.Platform = rt.Platform
	// What came from the host (its Node) is left out of the tree's digest,
	// so the same pins hash the same on every host, and recorded alone.
	var exclude []string
	for _, x := range rt.Host {
		if !x.Pinned {
			exclude = append(exclude, filepath.FromSlash(x.Path))
		}
		if !x.Interpreter {
			continue
		}
		h.SetInterpreter(x.Name, &reports.HostBinary{Path: x.Path, Version: x.Version, SHA256: x.SHA256, Source: x.Source, From: x.From, Integrity: x.Integrity})
	}
	if l := rt.GlibcLayer; l != nil {
		// The layer is the host's too: recorded file by file, out of the
		// tree's digest (the patched executables stay in it).
		h.GlibcLayer = &reports.GlibcLayer{Loader: l.Loader, LibDir: l.LibDir}
		for _, f := range l.Files {
			h.GlibcLayer.Files = append(h.GlibcLayer.Files, reports.GlibcLayerFile{Path: f.Path, Source: f.Source, SHA256: f.SHA256})
			exclude = append(exclude, filepath.FromSlash(f.Path), filepath.Dir(filepath.FromSlash(f.Path)))
		}
		for _, p := range l.Patched {
			h.GlibcLayer.Patched = append(h.GlibcLayer.Patched, reports.GlibcLayerPatch{Path: p.Path, OldInterp: p.OldInterp, SHA256: p.SHA256})
		}
	}
	if rt.Dir != "" && (m.Runtime.Prepare != nil || len(m.Runtime.Files) > 0) {
		var err error
		if h.TreeSHA256, h.TreeFiles, err = treeHash(rt.Dir, exclude...); err != nil {
			return h, fmt.Errorf("hash runtime tree %s: %w", rt.Dir, err)
		}
	}
	return h, nil
}

// readVersion returns the first non-empty line of the version launch's
// output (read bounded, capped), or why there is none.
func (cr *caseRun) readVersion(res *session.Result, err error) (string, string) {
	if err != nil {
		return "", truncate(errText(err, cr.r.key), 200)
	}
	if res == nil || res.Receipt == nil {
		return "", "no receipt"
	}
	f, err := os.Open(filepath.Join(cr.dir, "capture", "run", adapter.VersionLaunchID, "stdout.log"))
	if err != nil {
		return "", truncate(err.Error(), 200)
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, 4096))
	line := ""
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			line = truncate(redact(l, cr.r.key), 200)
			break
		}
	}
	if rc := res.Receipt.ReturnCode; rc == nil || *rc != 0 {
		return line, fmt.Sprintf("version launch: %s", receiptText(res, nil, cr.r.key))
	}
	if line == "" {
		return "", "version launch printed nothing"
	}
	return line, ""
}
