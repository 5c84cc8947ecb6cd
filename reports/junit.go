package reports

import (
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// JUnit XML as CI systems read it (the Jenkins/Surefire dialect), with
// names that stay the same from run to run so CI keeps each test's history
// (contract §9 reports): one testsuite per image of a run (name = the
// image), one testcase per case (classname "sandproof.<image>", name = the
// adapter, "/<scenario>" for every scenario but challenge, as in the case id,
// and " · <task>" with a task set); the run id and the provenance
// are properties. Counts are cases, as in report.md. A failed case's
// <failure> holds its decisive lines, its <system-err> the harness's own
// stderr tail.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Hostname   string          `xml:"hostname,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`

	seconds float64
	started time.Time
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string       `xml:"name,attr"`
	Classname string       `xml:"classname,attr"`
	Time      string       `xml:"time,attr"`
	Failure   *junitResult `xml:"failure"`
	Error     *junitResult `xml:"error"`
	Skipped   *junitResult `xml:"skipped"`
	SystemOut string       `xml:"system-out,omitempty"`
	SystemErr string       `xml:"system-err,omitempty"`
}

type junitResult struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// JUnitClassname is the classname of every case of image: stable across
// runs, so CI systems see the same tests each time.
func JUnitClassname(image string) string { return "sandproof." + image }

// JUnitName is a case's testcase name: the adapter, "/" and the scenario
// unless it is challenge (whose cases keep the name they had before
// scenarios, so CI keeps their history), and the task when the case comes
// from a task set.
func JUnitName(c *Case) string {
	n := c.Harness
	if c.Scenario != "" {
		n += "/" + c.Scenario
	}
	if c.TaskID != "" {
		n += " · " + c.TaskID
	}
	return n
}

func junitSeconds(s float64) string { return strconv.FormatFloat(s, 'f', 3, 64) }

// WriteJUnit renders rep as JUnit XML.
func WriteJUnit(w io.Writer, rep *Report) error {
	out := junitSuites{Name: "sandproof"}
	total := 0.0
	for _, r := range rep.Runs {
		suites := map[string]int{}
		var order []*junitSuite
		for _, c := range r.Cases {
			i, ok := suites[c.Image]
			if !ok {
				i = len(order)
				suites[c.Image] = i
				order = append(order, newJUnitSuite(r, c.Image))
			}
			s := order[i]
			tc := junitTestcase(c)
			switch {
			case tc.Failure != nil:
				s.Failures++
			case tc.Error != nil:
				s.Errors++
			case tc.Skipped != nil:
				s.Skipped++
			}
			s.Cases = append(s.Cases, tc)
			s.seconds += c.Evidence.Seconds
			if st := c.Evidence.StartedAt; !st.IsZero() && (s.started.IsZero() || st.Before(s.started)) {
				s.started = st
			}
			if s.Hostname == "" {
				s.Hostname = c.Evidence.Host
			}
		}
		for _, s := range order {
			s.Tests = len(s.Cases)
			s.Time = junitSeconds(s.seconds)
			if !s.started.IsZero() {
				s.Timestamp = s.started.UTC().Format("2006-01-02T15:04:05")
			}
			out.Tests += s.Tests
			out.Failures += s.Failures
			out.Errors += s.Errors
			out.Skipped += s.Skipped
			total += s.seconds
			out.Suites = append(out.Suites, *s)
		}
	}
	if len(out.Suites) == 0 {
		// No cases proves nothing; say so as an error rather than an
		// empty, green report.
		out.Tests, out.Errors = 1, 1
		out.Suites = append(out.Suites, junitSuite{
			Name: "sandproof", Tests: 1, Errors: 1, Time: junitSeconds(0),
			Cases: []junitCase{{Name: "evidence", Classname: "sandproof", Time: junitSeconds(0), Error: &junitResult{
				Message: "no cases recorded: status unknown", Type: "unknown"}}},
		})
	}
	out.Time = junitSeconds(total)
	printableJUnit(&out)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	return nil
}

// newJUnitSuite starts the suite of image in run r; its properties are
// the run's identity and provenance, which change from run to run while
// the names do not.
func newJUnitSuite(r *Run, image string) *junitSuite {
	s := &junitSuite{Name: image}
	prop := func(name, value string) {
		if value != "" {
			s.Properties = append(s.Properties, junitProperty{name, value})
		}
	}
	p := r.Provenance
	prop("run_id", r.ID)
	prop("image", image)
	for _, d := range p.ImageIDs {
		if d.Name == image {
			prop("image_id", d.Value)
		}
	}
	for _, v := range p.WardenSHA256 {
		prop("warden_sha256", v)
	}
	for _, d := range p.AdapterSHA256 {
		prop("adapter_sha256."+d.Name, d.Value)
	}
	for _, h := range p.Harnesses {
		prop("harness_runtime."+h.Name, RuntimeSummary(&h.Runtime))
	}
	for _, v := range p.SuiteVersions {
		prop("suite_version", v)
	}
	for _, v := range p.Hosts {
		prop("host", v)
	}
	for _, v := range p.Networks {
		prop("network", NetworkNote(v))
	}
	for _, v := range p.Engines {
		prop("engine", v)
	}
	return s
}

// junitTestcase is one case: its verdict, and for a case that did not
// pass the decisive lines (the same ones report.md shows).
func junitTestcase(c *Case) junitCase {
	e := c.Evidence
	tc := junitCase{Name: JUnitName(c), Classname: JUnitClassname(c.Image), Time: junitSeconds(e.Seconds)}
	body := strings.Join(CauseLines(c), "\n")
	switch c.Status {
	case StatusPassed:
		return tc
	case StatusFailed:
		tc.Failure = &junitResult{Message: CauseHeadline(c), Type: "failed", Text: body}
	case StatusSkipped:
		tc.Skipped = &junitResult{Message: e.SkipReason}
	default:
		tc.Error = &junitResult{Message: CauseHeadline(c), Type: "unknown", Text: body}
	}
	if len(e.HarnessStderrTail) > 0 {
		tc.SystemErr = strings.Join(e.HarnessStderrTail, "\n")
	}
	if len(e.HarnessStdoutTail) > 0 {
		tc.SystemOut = strings.Join(e.HarnessStdoutTail, "\n")
	}
	return tc
}

// printableJUnit makes every text of the tree Printable: attributes lose
// newlines and tabs too (XML would normalise them to spaces anyway), the
// failure text keeps them.
func printableJUnit(out *junitSuites) {
	at := func(s *string) { *s = Printable(*s, false) }
	res := func(r *junitResult) {
		if r != nil {
			at(&r.Message)
			at(&r.Type)
			r.Text = Printable(r.Text, true)
		}
	}
	at(&out.Name)
	for i := range out.Suites {
		s := &out.Suites[i]
		at(&s.Name)
		at(&s.Hostname)
		for j := range s.Properties {
			at(&s.Properties[j].Name)
			at(&s.Properties[j].Value)
		}
		for j := range s.Cases {
			c := &s.Cases[j]
			at(&c.Name)
			at(&c.Classname)
			res(c.Failure)
			res(c.Error)
			res(c.Skipped)
			c.SystemOut = Printable(c.SystemOut, true)
			c.SystemErr = Printable(c.SystemErr, true)
		}
	}
}
