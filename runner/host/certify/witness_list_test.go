package certify

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every verify and scenario check certify can write, and setup.borrowed,
// has a row in docs/threat-model.md's witness list (section
// "Witnesses"): the rule that a positive control reads a witness the
// harness cannot write holds for the next check only if it says which.
func TestThreatModelListsEveryWitness(t *testing.T) {
	var ids []string
	for _, id := range emittedCheckIDs(t) {
		if strings.HasPrefix(id, "verify.") || strings.HasPrefix(id, "scenario.") || id == "setup.borrowed" {
			ids = append(ids, id)
		}
	}
	// Positive control: the scan finds the checks of both kinds.
	if len(ids) < 15 || !strings.Contains(strings.Join(ids, " "), "scenario.writer_started") {
		t.Fatalf("the source scan found %v: it misses checks", ids)
	}
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), "docs", "threat-model.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "\n## Witnesses")
	if i < 0 {
		t.Fatal(`docs/threat-model.md has no section "## Witnesses"`)
	}
	// The list is the section's first table, up to its blank line.
	sec := doc[i+1:]
	k := strings.Index(sec, "\n| check | the witness it reads |")
	if k < 0 {
		t.Fatal(`docs/threat-model.md's Witnesses section has no table "| check | the witness it reads |"`)
	}
	sec = sec[k+1:]
	if j := strings.Index(sec, "\n\n"); j >= 0 {
		sec = sec[:j]
	}
	for _, id := range ids {
		listed := false
		for _, line := range strings.Split(sec, "\n") {
			if cells := strings.Split(line, "|"); len(cells) > 2 && strings.Contains(cells[1], "`"+id+"`") {
				listed = true
			}
		}
		if !listed {
			t.Errorf("check %s has no row in docs/threat-model.md's witness list", id)
		}
	}
}
