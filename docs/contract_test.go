package docs

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// A clause is a numbered heading of contract.md: "### 2 stop rules".
var headingRE = regexp.MustCompile(`^#{2,4} ([0-9]+(?:\.[0-9]+)*) (.+)$`)

// clauses reads the clauses (number and words, lower case) and the section
// numbers of a contract.
func clauses(path string) (map[string]bool, map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	full, nums := map[string]bool{}, map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := headingRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		full[strings.ToLower(m[1]+" "+strings.TrimSpace(m[2]))] = true
		nums[m[1]] = true
	}
	return full, nums, sc.Err()
}

// The forms a citation takes in the tree (docs/contract.md, "How clauses
// are cited").
var (
	// Outside documents: the contract once lived beside the repository.
	outsideRE = regexp.MustCompile(`SPEC(?:\.md| §)`)
	// A structured clause: a check's clause ("§7.4 verify") in a Go string.
	checkClauseRE = regexp.MustCompile(`"§([0-9]+(?:\.[0-9]+)*) ([^"§]+)"`)
	// A conformance spec's clause and a mutant's clause.
	specClauseRE   = regexp.MustCompile(`ConformanceIt\(\s*"([^"]+)"`)
	mutantClauseRE = regexp.MustCompile(`\{"[a-z0-9]+", "([0-9]+(?:\.[0-9]+)* [a-z][^"]*)", "`)
	// A clause label, as --label-filter takes it.
	labelRE = regexp.MustCompile(`spec:([0-9][a-z0-9.-]*[a-z0-9])`)
	// A section number in prose: "§7.4", "contract §2".
	sectionRE = regexp.MustCompile(`§ ?([0-9]+(?:\.[0-9]+)*)`)
)

type citation struct {
	file string
	line int
	text string
	why  string
}

func (c citation) String() string { return fmt.Sprintf("%s:%d: %s: %q", c.file, c.line, c.why, c.text) }

// label is framework.ClauseLabel without the import (the conformance
// framework pulls in Ginkgo).
func label(clause string) string { return strings.Join(strings.Fields(strings.ToLower(clause)), "-") }

// scan reports every citation under root that does not resolve in the
// contract at contractPath. The contract itself is scanned too: its prose
// cites its own sections.
func scan(root, contractPath string) ([]citation, error) {
	full, nums, err := clauses(contractPath)
	if err != nil {
		return nil, err
	}
	labels := map[string]bool{}
	for c := range full {
		labels[label(c)] = true
	}
	var bad []citation
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		ext := filepath.Ext(name)
		if !slices.Contains([]string{".go", ".md", ".tmpl", ".sh", ".yaml", ".yml", ".json", ".jsonl", ".xml", ".html"}, ext) && name != "Makefile" {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if rel == filepath.Join("docs", "contract_test.go") {
			return nil // the scanner's positive control plants bad citations
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(data), "\n") {
			at := func(text, why string) { bad = append(bad, citation{rel, i + 1, text, why}) }
			if m := outsideRE.FindString(line); m != "" {
				at(m, "cites a document outside the repository (cite docs/contract.md)")
			}
			for _, m := range checkClauseRE.FindAllStringSubmatch(line, -1) {
				if !full[strings.ToLower(m[1]+" "+m[2])] {
					at(m[0], "check clause names no heading of docs/contract.md")
				}
			}
			for _, re := range []*regexp.Regexp{specClauseRE, mutantClauseRE} {
				for _, m := range re.FindAllStringSubmatch(line, -1) {
					if !full[strings.ToLower(m[1])] {
						at(m[1], "clause names no heading of docs/contract.md")
					}
				}
			}
			for _, m := range labelRE.FindAllStringSubmatch(line, -1) {
				if !labels[m[1]] {
					at(m[0], "label names no clause of docs/contract.md")
				}
			}
			for _, m := range sectionRE.FindAllStringSubmatch(line, -1) {
				if !nums[m[1]] {
					at(m[0], "section number names no heading of docs/contract.md")
				}
			}
		}
		return nil
	})
	return bad, err
}

// TestCitationsResolve holds the repository to its own contract: every
// citation resolves to a heading of docs/contract.md.
func TestCitationsResolve(t *testing.T) {
	bad, err := scan("..", "contract.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range bad {
		t.Error(c)
	}
}

// TestScanCatchesBadCitations is the scanner's positive control: a tree
// with one citation of every form, good and bad, and only the bad ones
// reported.
func TestScanCatchesBadCitations(t *testing.T) {
	dir := t.TempDir()
	contract := filepath.Join(dir, "contract.md")
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("contract.md", "# c\n## 2 warden supervise\n### 2 stop rules\n## 7 case protocol\n### 7.4 verify\n")
	write("good.go", `package x
// Stops as contract §2 stop rules says; see §7.4.
var _ = ConformanceIt("2 stop rules", "should")
const c = "§7.4 verify"
var m = []any{{"groupkill", "2 stop rules", "why"}}
// --label-filter='spec:2-stop-rules'
`)
	write("bad.go", `package x
// SPEC.md section 2
var _ = ConformanceIt("2 stop rule", "should")
const c = "§7.4 verification"
var m = []any{{"groupkill", "3 receipt", "why"}}
// --label-filter='spec:7-verify' and §7.9
`)
	bad, err := scan(dir, contract)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range bad {
		if c.file != "bad.go" {
			t.Errorf("good citation reported: %v", c)
			continue
		}
		got = append(got, fmt.Sprintf("%d %s", c.line, c.text))
	}
	want := []string{"2 SPEC.md", "3 2 stop rule", "4 \"§7.4 verification\"", "5 3 receipt", "6 spec:7-verify", "6 §7.9"}
	if !slices.Equal(got, want) {
		t.Errorf("reported %q, want %q", got, want)
	}
}
