// Package reports reads sandproof evidence (schema sandproof.evidence/v1, one
// JSON object per case in evidence.jsonl, contract §8), folds it into
// one result tree (run -> case -> checks) and renders that tree as Markdown,
// self-contained HTML, JUnit XML or JSON. It also compares two runs case by
// case (Diff), which is what a CI gate on regressions needs.
//
// The tree is deliberately strict: a case with no checks, or a run with no
// cases, is unknown and never passed; a failed check outranks whatever the
// record claims; duplicate and malformed records are rejected with their file
// and line rather than silently merged, because a report that quietly drops
// or double-counts a case is worse than no report.
package reports
