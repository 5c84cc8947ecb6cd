package model

import (
	"encoding/json"
	"regexp"
	"strings"
)

// A harness that meets a context limit (model-400's answer) compacts its
// conversation, as a good one should: it sends a summary request (its
// own instruction asking for a summary of the conversation, with its
// tools declared or not), then goes on from the summary it got (the
// resumed conversation), which carries the summary and often the
// challenge's content as text but no longer the challenge prompt's turns
// (Claude Code 2.1.332 left the prompt out of both). Issue 38: the
// scripted model answered such a summary with the deliverable's write,
// then read the resumed conversation as an old prompt-token prompt and
// asked the harness to overwrite /task/challenge.txt with the
// challenge. So it recognises both requests from what they carry, keeps
// to the challenge flow through them, and never asks a harness to write
// a file the task gave it to read (guard).

// SummaryMark begins, and summaryEnd ends, every summary the scripted
// model writes: what tells a resumed conversation (one that carries a
// summary of the model's) from any other, in whichever turn the harness
// puts the summary (Claude Code and Codex a user turn, OpenCode the
// assistant's). The mark's line ends with the summary's id, ", s7]" (the
// number of the request it answered), which the answers name in
// SummaryHeader and ResumesHeader.
const (
	SummaryMark = "[sandproof summary of the conversation so far"
	summaryEnd  = "[end of the summary]"
)

// summaryIDs finds the ids of the model's summaries in a text.
var summaryIDs = regexp.MustCompile(regexp.QuoteMeta(SummaryMark) + `, (s[0-9]+)\]`)

// resumesFrom is the id of the last of the model's summaries c carries,
// "" for none.
func resumesFrom(c conversation) string {
	id := ""
	for _, t := range []string{c.SystemText, c.UserText, c.AssistantText} {
		if m := summaryIDs.FindAllStringSubmatch(t, -1); m != nil {
			id = m[len(m)-1][1]
		}
	}
	return id
}

var (
	// summaryAsk is an instruction asking for a summary of the
	// conversation, in the last user text: Claude Code's "create a
	// detailed summary of the conversation", Codex's "CONTEXT CHECKPOINT
	// COMPACTION. Create a handoff summary", OpenCode's and Kilo's
	// "Provide a detailed prompt for continuing our conversation", Qwen
	// Code's "produce the <state_snapshot> XML".
	summaryAsk = regexp.MustCompile(`(?i)\b(?:create|write|provide|produce|generate|give)\b[^.\n]{0,80}(?:\bsummary\b|\bhandoff\b|<?\bstate_snapshot\b)` +
		`|\bsummari[sz](?:e|ing)\b[^.\n]{0,40}\b(?:conversation|chat|history|session)s?\b|\bcontinuing our conversation\b|\bcontext checkpoint compaction\b`)
	// summarySystem is a system prompt whose whole job is the summary
	// (OpenCode's compaction agent; Qwen Code 0.24.4's "You are the
	// component that summarizes a conversation when its context window is
	// about to overflow"),
	// narrower than summaryAsk: a harness's own system prompt may well
	// speak of summaries it makes at other times (Claude Code's "the
	// current context is summarized").
	summarySystem = regexp.MustCompile(`(?i)\btasked with summari[sz]ing\b|\bcompress(?:es|ing)? (?:the )?(?:internal )?chat history\b|\bcontext checkpoint compaction\b` +
		`|\bsummari[sz]es a conversation when its context window\b`)
	// reminders are Claude Code's <system-reminder> blocks, which it puts
	// beside the user's own words and which are not the user's ask.
	reminders = regexp.MustCompile(`(?s)<system-reminder>.*?</system-reminder>`)
	// ownSummaries are the model's own summaries in a text.
	ownSummaries = regexp.MustCompile(`(?s)` + regexp.QuoteMeta(SummaryMark) + `.*?(?:` + regexp.QuoteMeta(summaryEnd) + `|$)`)
)

// asksSummary says c is a summary request: its last user text, the
// model's own summaries and the harness's reminders left out, asks for a
// summary of the conversation, or its system prompt is one whose job is
// the summary and the last turn is the user's.
func asksSummary(c conversation) bool {
	last := ownSummaries.ReplaceAllString(reminders.ReplaceAllString(c.LastUserText, ""), "")
	if summaryAsk.MatchString(last) {
		return true
	}
	return strings.TrimSpace(last) != "" && summarySystem.MatchString(c.SystemText)
}

// resumed says c goes on from a summary the model wrote.
func resumed(c conversation) bool {
	return strings.Contains(c.UserText, SummaryMark) || strings.Contains(c.AssistantText, SummaryMark) ||
		strings.Contains(c.SystemText, SummaryMark)
}

// taskText is where the task is found: the user's words and the model's
// own (a summary the harness kept as the assistant's turn).
func (c conversation) taskText() string { return c.UserText + "\n" + c.AssistantText }

// findChallenge is the challenge the conversation carries: in a tool
// result, or, in a conversation resumed from the model's summary, in any
// of its text (the summary, or the read's result the harness kept as
// text). Only a resumed one: elsewhere the proof must come back as a tool
// result.
func findChallenge(c conversation) string {
	for _, r := range c.ToolResults {
		if ch := FindChallenge(r); ch != "" {
			return ch
		}
	}
	if resumed(c) {
		for _, t := range []string{c.UserText, c.AssistantText, c.SystemText} {
			if ch := FindChallenge(t); ch != "" {
				return ch
			}
		}
	}
	return ""
}

// written says the write of token was asked already: an earlier call
// carried it, or a resumed conversation's text does (the harness kept
// the call as text, or the summary says so).
func written(c conversation, token string) bool {
	for _, a := range c.CalledArgs {
		if strings.Contains(a, token) {
			return true
		}
	}
	return resumed(c) && (strings.Contains(c.UserText, token) || strings.Contains(c.AssistantText, token))
}

// task is the certification task as the model knows it: the challenge's
// path and the deliverable's (the challenge flow), or the deliverable's
// and the token the prompt gives (the prompt-token flow).
type task struct {
	challengePath, target, token string
}

// taskOf finds the task in c's text: the challenge prompt; else the
// challenge task the model last saw (known: Claude Code left the prompt
// out of its summary request, and a summary that kept no task would
// lose the challenge); else an old prompt-token prompt, unless the file
// it names is one the task gave to read (that conversation's read call,
// or its result, looks like such a prompt to ParsePrompt: the issue's
// overwritten challenge).
func (d decider) taskOf(c conversation) (task, bool) {
	text := c.taskText()
	if ch, target, ok := ParseChallengePrompt(text); ok {
		return task{challengePath: ch, target: target}, true
	}
	if d.task != (task{}) {
		return d.task, true
	}
	if path, token, ok := ParsePrompt(text); ok && !d.isInput(c, path) {
		return task{target: path, token: token}, true
	}
	return task{}, false
}

// summary answers a summary request with one that keeps the task, in
// the user's words, so the resumed conversation is the challenge's
// still: the task (taskOf), the challenge if c carries it, and whether
// the deliverable was written.
func (d decider) summary(c conversation) reply {
	t, ok := d.taskOf(c)
	lines := []string{SummaryMark + ", " + d.summaryID + "]"}
	switch {
	case !ok:
		lines = append(lines, "No task was found in the conversation.")
	case t.challengePath != "":
		lines = append(lines, "The user's task, in their words: "+ChallengePrompt(t.challengePath, t.target))
		if ch := findChallenge(c); ch != "" {
			lines = append(lines, "Read so far: "+t.challengePath+" holds the challenge "+ch+".")
			if written(c, d.token(ch)) {
				lines = append(lines, "The deliverable "+t.target+" was written; what is left is to reply done.")
			}
		}
	default:
		lines = append(lines, "The user's task, in their words: "+CertPrompt(t.target, t.token))
	}
	return reply{Kind: replySummary, Text: strings.Join(append(lines, summaryEnd), "\n"), Summary: d.summaryID}
}

// inputs are the files the task gave the model to read: the challenge
// the request's prompt names, the one of the task it last saw, and every
// file it asked to read.
func (d decider) inputs(c conversation) []string {
	in := append([]string(nil), d.readPaths...)
	if ch, _, ok := ParseChallengePrompt(c.taskText()); ok {
		in = append(in, ch)
	}
	return append(in, d.task.challengePath)
}

// isInput says path is one of inputs.
func (d decider) isInput(c conversation, path string) bool {
	for _, in := range d.inputs(c) {
		if in != "" && names(path, in) {
			return true
		}
	}
	return false
}

// guard refuses a tool call that would write a file the task gave the
// model to read (the challenge, any file it asked to read): a call, other
// than the read itself, any of whose string arguments names one of them,
// a write tool's path or a shell command alike. Refusing more than a
// write (a command that only mentions the file) costs nothing: the
// flows never need to name an input outside the read.
func (d decider) guard(c conversation, rep reply) reply {
	if rep.ToolName == "" || rep.Kind == replyRead {
		return rep
	}
	var args any
	if json.Unmarshal([]byte(rep.Arguments), &args) != nil {
		args = rep.Arguments
	}
	for _, in := range d.inputs(c) {
		if in != "" && names(args, in) {
			return reply{Kind: replyNoTask, Text: "I will not write " + in + ": the task gave it to me to read.",
				Note: "refused a " + rep.ToolName + " call that names the task's input " + in}
		}
	}
	return rep
}

// names says a JSON value holds path in one of its strings.
func names(v any, path string) bool {
	switch v := v.(type) {
	case string:
		return strings.Contains(v, path)
	case []any:
		for _, e := range v {
			if names(e, path) {
				return true
			}
		}
	case map[string]any:
		for _, e := range v {
			if names(e, path) {
				return true
			}
		}
	}
	return false
}
