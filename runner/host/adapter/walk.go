package adapter

import (
	"slices"

	"go.yaml.in/yaml/v3"
)

// MappingIssueKind is what WalkMapping found wrong with a mapping.
type MappingIssueKind int

const (
	// NotMapping: the node is not a mapping; nothing else is walked.
	NotMapping MappingIssueKind = iota
	// UnknownKey: a key no handler reads.
	UnknownKey
	// GivenTwice: a key after its first occurrence.
	GivenTwice
	// MissingKey: a required key that is not there.
	MissingKey
)

// MappingIssue is one problem of a mapping, in the order the walk meets
// it (its keys in file order, then the missing ones in required order).
type MappingIssue struct {
	Kind MappingIssueKind
	// Node is the key's node (UnknownKey, GivenTwice) or the mapping's
	// (NotMapping, MissingKey): its line is the error's.
	Node *yaml.Node
	// Name is the key as written (as required for MissingKey); Path is
	// it below where ("where.name", or "name" when where is "").
	Name, Path string
	// Known are the handlers' keys, sorted (UnknownKey only).
	Known []string
}

// WalkMapping is the one strict walk of a YAML mapping the manifest and
// the preparers' `with` blocks share: each key must have a handler and
// appear once, the required ones must appear. Each key's handler gets its
// path below where and its value node, in file order; each problem goes
// to issue, which words it (the manifest and a preparer word them their
// own way). It returns false when n is not a mapping.
func WalkMapping(n *yaml.Node, where string, required []string, handlers map[string]func(key string, v *yaml.Node), issue func(MappingIssue)) bool {
	if n.Kind != yaml.MappingNode {
		issue(MappingIssue{Kind: NotMapping, Node: n})
		return false
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := join(where, k.Value)
		if k.Kind != yaml.ScalarNode {
			// An alias key's Value is its anchor's name, not what it
			// stands for ("*a" for &a d means "d" in YAML): no key is read
			// but one written out.
			name := k.Value
			if k.Kind == yaml.AliasNode {
				name = "*" + name
			}
			issue(MappingIssue{Kind: UnknownKey, Node: k, Name: name, Path: join(where, name), Known: knownKeys(handlers)})
			continue
		}
		h, ok := handlers[k.Value]
		if !ok {
			issue(MappingIssue{Kind: UnknownKey, Node: k, Name: k.Value, Path: key, Known: knownKeys(handlers)})
			continue
		}
		if seen[k.Value] {
			issue(MappingIssue{Kind: GivenTwice, Node: k, Name: k.Value, Path: key})
			continue
		}
		seen[k.Value] = true
		h(key, v)
	}
	for _, r := range required {
		if !seen[r] {
			issue(MappingIssue{Kind: MissingKey, Node: n, Name: r, Path: join(where, r)})
		}
	}
	return true
}

func join(where, key string) string {
	if where == "" {
		return key
	}
	return where + "." + key
}

// knownKeys are the handlers' keys, sorted.
func knownKeys(handlers map[string]func(key string, v *yaml.Node)) []string {
	known := make([]string, 0, len(handlers))
	for name := range handlers {
		known = append(known, name)
	}
	slices.Sort(known)
	return known
}
