package model

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// The scripted model picks the tools it calls by what each tool's JSON
// schema can express (docs/model.md, Choosing tools): the argument that
// takes a path (a string, an array of path strings, an array of objects
// with a path), the one that takes a command (a string, an argv array, a
// list of whole commands) and the one that takes a file's content. A
// tool's name and description only order the tools that can, and rule
// out a tool whose name says it does something else (view_image{path},
// search_files{path}, finish{paths}): a path argument alone does not say
// the tool reads.

// schema is one JSON schema object, as a request carries it.
type schema = map[string]any

// pathNames are the names of a string argument that takes a file's path,
// in order of preference; pathListNames, of an array of them.
var (
	pathNames     = []string{"path", "filePath", "file_path", "filepath", "filename", "file", "target", "absolute_path"}
	pathListNames = []string{"paths", "files", "file_paths", "filePaths", "filenames"}
	// contentNames take a file's whole new content.
	contentNames = []string{"content", "contents", "file_text", "text", "new_text", "data", "body", "new_content", "file_content"}
	// commandNames take a whole shell command as a string; argvNames, an
	// argv array (older Codex's shell{command: [..]}); commandListNames,
	// a list of whole commands (Cline's run_commands{commands: [..]}).
	commandNames     = []string{"command", "cmd", "script", "shell_command", "commandline"}
	argvNames        = []string{"command", "cmd", "argv", "args"}
	commandListNames = []string{"commands", "cmds", "scripts"}
)

// Words in a tool's name that say it does something other than the role
// asked for: such a tool is never called for it, whatever its schema.
var (
	notRead  = []string{"write", "edit", "patch", "create", "delete", "remove", "move", "rename", "search", "grep", "glob", "find", "list", "ls", "fetch", "web", "image", "exec", "bash", "shell", "command", "terminal", "finish", "submit", "todo"}
	notWrite = []string{"read", "view", "delete", "remove", "move", "rename", "search", "grep", "glob", "find", "list", "fetch", "web", "image", "patch", "todo", "finish", "submit"}
)

// readWord, shellWord and writeWord find a role in a tool's description
// (as whole words: "thread" does not say read).
var (
	readWord  = regexp.MustCompile(`(?i)\b(read|reads|reading)\b`)
	shellWord = regexp.MustCompile(`(?i)\b(shell|bash|terminal|execute|executes|run|runs)\b`)
	writeWord = regexp.MustCompile(`(?i)\b(write|writes|create|creates|creating)\b`)
)

// operandWords name a required argument the model cannot fill with a
// harmless value: it is the operand of another operation (an edit's old
// text, a search's pattern), so a tool requiring one is not the role's.
var operandWords = []string{"old", "pattern", "query", "regex", "search", "url", "find"}

// nameWords splits a tool's name into lower-case words (read_files,
// ReadFile, run-commands).
func nameWords(n string) []string {
	var b strings.Builder
	for i, r := range n {
		if r >= 'A' && r <= 'Z' && i > 0 {
			b.WriteByte(' ')
		}
		if r == '_' || r == '-' || r == '.' {
			r = ' '
		}
		b.WriteRune(r)
	}
	return strings.Fields(strings.ToLower(b.String()))
}

// nameSays reports whether one of the name's words is, or begins with,
// one of words ("read_files" says read, "ls" says ls, "classify" does not).
func nameSays(name string, words []string) bool {
	for _, w := range nameWords(name) {
		for _, want := range words {
			if w == want || len(want) > 2 && strings.HasPrefix(w, want) {
				return true
			}
		}
	}
	return false
}

// types are the JSON types a schema allows: its "type" (a string or a
// list) and those of its anyOf/oneOf members ("null" left out); nil when
// it names none.
func types(s schema) []string {
	var out []string
	switch t := s["type"].(type) {
	case string:
		out = append(out, t)
	case []any:
		for _, x := range t {
			if x, ok := x.(string); ok {
				out = append(out, x)
			}
		}
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		alts, _ := s[k].([]any)
		for _, a := range alts {
			if m, ok := a.(schema); ok {
				out = append(out, types(m)...)
			}
		}
	}
	return slices.DeleteFunc(out, func(t string) bool { return t == "null" })
}

// isString says a schema takes a string: typed string, or untyped.
func isString(s schema) bool {
	t := types(s)
	return len(t) == 0 || slices.Contains(t, "string")
}

func isArray(s schema) bool { return slices.Contains(types(s), "array") }

// items is an array schema's item schema (its first object or string
// alternative, for an anyOf of items).
func items(s schema) schema {
	it, _ := s["items"].(schema)
	return it
}

// props are a schema's properties by name.
func props(s schema) map[string]schema {
	out := map[string]schema{}
	ps, _ := s["properties"].(map[string]any)
	for k, v := range ps {
		if m, ok := v.(schema); ok {
			out[k] = m
		}
	}
	return out
}

// requiredOf lists a schema's required properties, in its order.
func requiredOf(s schema) []string {
	req, _ := s["required"].([]any)
	var out []string
	for _, r := range req {
		if k, ok := r.(string); ok && k != "" {
			out = append(out, k)
		}
	}
	return out
}

// pick returns the first of names (case-insensitively) among the
// schema's properties that ok accepts.
func pick(ps map[string]schema, names []string, ok func(schema) bool) string {
	keys := make([]string, 0, len(ps))
	for k := range ps {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, want := range names {
		for _, k := range keys {
			if strings.EqualFold(k, want) && ok(ps[k]) {
				return k
			}
		}
	}
	return ""
}

// plainString is a string argument that takes free text: not an enum.
func plainString(s schema) bool { return isString(s) && s["enum"] == nil }

// pathArgs gives the arguments that name path in a tool's schema s: a
// path string, an array of path strings, or an array of objects with a
// path (each built from its item schema); ok is false when s has none.
func pathArgs(s schema, path string) (map[string]any, bool) {
	ps := props(s)
	if p := pick(ps, pathNames, plainString); p != "" {
		return map[string]any{p: path}, true
	}
	keys := make([]string, 0, len(ps))
	for k := range ps {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !isArray(ps[k]) {
			continue
		}
		it := items(ps[k])
		if it != nil && slices.Contains(types(it), "object") {
			if inner, ok := pathArgs(it, path); ok && fill(it, inner) {
				return map[string]any{k: []any{inner}}, true
			}
		}
	}
	isPathList := func(p schema) bool { return isArray(p) && (items(p) == nil || isString(items(p))) }
	if p := pick(ps, pathListNames, isPathList); p != "" {
		return map[string]any{p: []any{path}}, true
	}
	return nil, false
}

// rank orders the tools that can play a role: 0 when the name says the
// role, 1 when only the description does, 2 when neither; -1 rules the
// tool out (its name says something else).
func rank(t Tool, says, not []string, word *regexp.Regexp) int {
	switch {
	case nameSays(t.Name, says):
		return 0
	case nameSays(t.Name, not):
		return -1
	case word.MatchString(t.Description):
		return 1
	}
	return 2
}

// ranked calls plan on tools in rank order (the declared order within a
// rank), up to maxRank, and returns the first tool it plans for.
func ranked(tools []Tool, maxRank int, rankOf func(Tool) int, plan func(Tool) (map[string]any, bool)) (string, string, bool) {
	for r := 0; r <= maxRank; r++ {
		for _, t := range tools {
			if rankOf(t) != r {
				continue
			}
			if args, ok := plan(t); ok {
				return t.Name, marshal(args), true
			}
		}
	}
	return "", "", false
}

// readArgs plans a read tool's arguments: a path argument, no content
// (that is a write tool), every other required argument filled.
func readArgs(t Tool, path string) (map[string]any, bool) {
	s := schema(t.Parameters)
	if pick(props(s), contentNames, plainString) != "" {
		return nil, false
	}
	args, ok := pathArgs(s, path)
	if !ok || !fill(s, args) {
		return nil, false
	}
	return args, true
}

// readRank: a read tool's name says read (read, view, cat, open; a name
// with "read" in it that is not "thread"), or its description does.
func readRank(t Tool) int {
	if isReadName(t.Name) && !nameSays(t.Name, []string{"terminal", "todo"}) {
		return 0
	}
	return rank(t, []string{"cat", "open"}, notRead, readWord)
}

// planRead picks a read tool whose name or description says it reads
// (never one that says only where, a path argument alone).
func planRead(tools []Tool, path string) (string, string, bool) {
	return ranked(tools, 1, readRank, func(t Tool) (map[string]any, bool) { return readArgs(t, path) })
}

// writeArgs plans a write tool's arguments: a path string and a content
// string, every other required argument filled (an enum with the value
// that means create or write).
func writeArgs(t Tool, path, content string) (map[string]any, bool) {
	s := schema(t.Parameters)
	ps := props(s)
	p := pick(ps, pathNames, plainString)
	c := pick(ps, contentNames, plainString)
	if p == "" || c == "" {
		return nil, false
	}
	args := map[string]any{p: path, c: content}
	if !fill(s, args) {
		return nil, false
	}
	return args, true
}

func writeRank(t Tool) int {
	if isWriteName(t.Name) {
		return 0
	}
	r := rank(t, []string{"edit", "editor", "save"}, notWrite, writeWord)
	if r == 0 {
		return 1 // an editor is a write tool after the ones named for it
	}
	return r
}

func planWrite(tools []Tool, path, content string) (string, string, bool) {
	return ranked(tools, 2, writeRank, func(t Tool) (map[string]any, bool) { return writeArgs(t, path, content) })
}

// shellArgs plans a shell tool's arguments: script where its command is
// a string or a list of whole commands (one item), argv where it is an
// argv array.
func shellArgs(t Tool, script string, argv []string) (map[string]any, bool) {
	s := schema(t.Parameters)
	ps := props(s)
	strItems := func(p schema) bool { return isArray(p) && (items(p) == nil || isString(items(p))) }
	args := map[string]any{}
	if c := pick(ps, commandNames, func(p schema) bool { return plainString(p) && !isArray(p) }); c != "" {
		args[c] = script
	} else if c := pick(ps, argvNames, strItems); c != "" {
		args[c] = argv
	} else if c := pick(ps, commandListNames, strItems); c != "" {
		args[c] = []any{script}
	} else {
		return nil, false
	}
	fill(s, args) // a shell tool's free-text requirements are harmless (OpenCode's description)
	return args, true
}

// shellRank: a shell tool's name says so (bash, shell, exec, terminal,
// command), else its description.
func shellRank(t Tool) int {
	if isShellName(t.Name) {
		return 0
	}
	if shellWord.MatchString(t.Description) && !nameSays(t.Name, []string{"read", "write", "edit", "search", "fetch", "process", "finish", "submit"}) {
		return 1
	}
	return -1
}

// fill gives the required arguments of s not yet in args a value from the
// schema: its default; an enum's value that means create or write (else
// its first); a harmless number, boolean or text; an object built from its
// own schema; an array with one built item where it must have one. It
// reports false when a required argument is the operand of another
// operation (operandWords: an edit's old text, a search's pattern).
func fill(s schema, args map[string]any) bool {
	ps := props(s)
	for _, k := range requiredOf(s) {
		if _, set := args[k]; set {
			continue
		}
		v, ok := value(k, ps[k])
		if !ok {
			return false
		}
		args[k] = v
	}
	return true
}

// createValues are an enum's values that mean create or write, in order.
var createValues = []string{"create", "write", "overwrite", "new", "save"}

// value is a harmless value for the required argument k of schema p.
func value(k string, p schema) (any, bool) {
	if d, ok := p["default"]; ok {
		return d, true
	}
	if enum, _ := p["enum"].([]any); len(enum) > 0 {
		for _, want := range createValues {
			for _, e := range enum {
				if s, ok := e.(string); ok && strings.EqualFold(s, want) {
					return s, true
				}
			}
		}
		return enum[0], true
	}
	t := types(p)
	switch {
	case slices.Contains(t, "object"):
		obj := map[string]any{}
		return obj, fill(p, obj)
	case slices.Contains(t, "array"):
		if n, _ := p["minItems"].(float64); n >= 1 {
			if it := items(p); it != nil {
				v, ok := value(k, it)
				return []any{v}, ok
			}
		}
		return []any{}, true
	case slices.Contains(t, "integer"), slices.Contains(t, "number"):
		// A timeout: generous whether the unit is seconds or ms.
		desc, _ := p["description"].(string)
		if strings.Contains(strings.ToLower(k+desc), "ms") || strings.Contains(strings.ToLower(desc), "millisecond") {
			return 60000, true
		}
		return 60, true
	case slices.Contains(t, "boolean"):
		return false, true
	}
	if nameSays(k, operandWords) {
		return nil, false
	}
	return "Write the deliverable file", true
}

// Bounds of ToolShapes: tools listed, bytes per tool, nesting shown.
const (
	shapeTools = 16
	shapeBytes = 96
	shapeDepth = 2
)

// ToolShapes names each declared tool with the shape of its required
// arguments (every argument when none is required), so a reader can see
// what the scripted model was offered: read_files{files:[{path}]},
// run_commands{commands:[string]}, editor{path,new_text}. Names come
// from the harness: each tool's entry is capped at shapeBytes, and at
// most shapeTools are listed, the rest counted.
func ToolShapes(tools []Tool) string {
	var out []string
	for i, t := range tools {
		if i == shapeTools {
			out = append(out, fmt.Sprintf("and %d more", len(tools)-shapeTools))
			break
		}
		out = append(out, capShape(t.Name+shape(schema(t.Parameters), shapeDepth)))
	}
	if len(out) == 0 {
		return "(none)"
	}
	return strings.Join(out, ", ")
}

func capShape(s string) string {
	if len(s) <= shapeBytes {
		return s
	}
	cut := shapeBytes
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut-- // not inside a UTF-8 sequence
	}
	return s[:cut] + "…"
}

// shape renders an object schema's arguments, {a,b:[string],c:{d}}.
func shape(s schema, depth int) string {
	ps := props(s)
	keys := requiredOf(s)
	if len(keys) == 0 {
		for k := range ps {
			keys = append(keys, k)
		}
		sort.Strings(keys)
	}
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+argShape(ps[k], depth))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// argShape is one argument's shape after its name: nothing for a scalar,
// :[ITEM] for an array, :{...} for an object.
func argShape(p schema, depth int) string {
	t := types(p)
	switch {
	case slices.Contains(t, "array"):
		it := items(p)
		if it == nil {
			return ":[]"
		}
		if slices.Contains(types(it), "object") {
			if depth <= 1 {
				return ":[{…}]"
			}
			return ":[" + shape(it, depth-1) + "]"
		}
		if it := types(it); len(it) > 0 {
			return ":[" + it[0] + "]"
		}
		return ":[string]"
	case slices.Contains(t, "object") && len(props(p)) > 0:
		if depth <= 1 {
			return ":{…}"
		}
		return ":" + shape(p, depth-1)
	}
	return ""
}
