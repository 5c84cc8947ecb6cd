package reports

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"
)

// JUnit XML as CI systems read it (the Jenkins/Surefire dialect): one
// testsuite per case, one testcase per check. A case whose status its checks
// do not explain (unknown, failed or skipped by its record alone) gets one
// more testcase, "case status", so a CI view never shows green for a case
// the report does not call passed.
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
	ID         string          `xml:"id,attr,omitempty"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Hostname   string          `xml:"hostname,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string       `xml:"name,attr"`
	Classname string       `xml:"classname,attr"`
	Failure   *junitResult `xml:"failure"`
	Error     *junitResult `xml:"error"`
	Skipped   *junitResult `xml:"skipped"`
}

type junitResult struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// WriteJUnit renders rep as JUnit XML.
func WriteJUnit(w io.Writer, rep *Report) error {
	out := junitSuites{Name: "sandproof"}
	total := 0.0
	for _, r := range rep.Runs {
		for _, c := range r.Cases {
			s := junitCaseSuite(r, c)
			out.Tests += s.Tests
			out.Failures += s.Failures
			out.Errors += s.Errors
			out.Skipped += s.Skipped
			total += c.Evidence.Seconds
			out.Suites = append(out.Suites, s)
		}
	}
	if len(out.Suites) == 0 {
		// No cases proves nothing; say so as an error rather than an
		// empty, green report.
		out.Tests, out.Errors = 1, 1
		out.Suites = append(out.Suites, junitSuite{
			Name: "sandproof", Tests: 1, Errors: 1, Time: "0.000",
			Cases: []junitCase{{Name: "evidence", Classname: "sandproof", Error: &junitResult{
				Message: "no cases recorded: status unknown", Type: "unknown"}}},
		})
	}
	out.Time = fmt.Sprintf("%.3f", total)
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

func junitCaseSuite(r *Run, c *Case) junitSuite {
	e := c.Evidence
	s := junitSuite{
		Name:     r.ID + " / " + c.Name,
		ID:       c.ID,
		Time:     fmt.Sprintf("%.3f", e.Seconds),
		Hostname: e.Host,
	}
	if !e.StartedAt.IsZero() {
		s.Timestamp = e.StartedAt.UTC().Format(time.RFC3339)
	}
	prop := func(name, value string) {
		if value != "" {
			s.Properties = append(s.Properties, junitProperty{name, value})
		}
	}
	prop("run_id", r.ID)
	prop("case_id", c.ID)
	prop("task_id", c.TaskID)
	prop("image", c.Image)
	prop("image_id", e.ImageID)
	prop("harness", c.Harness)
	prop("status", string(c.Status))
	prop("record_status", string(c.RecordStatus))
	prop("skip_reason", e.SkipReason)
	prop("warden_sha256", e.WardenSHA256)
	prop("adapter_sha256", e.AdapterSHA256)
	prop("suite_version", e.SuiteVersion)
	prop("host", e.Host)
	if !e.StartedAt.IsZero() {
		prop("started_at", e.StartedAt.UTC().Format(time.RFC3339Nano))
	}
	if !e.EndedAt.IsZero() {
		prop("ended_at", e.EndedAt.UTC().Format(time.RFC3339Nano))
	}
	prop("source", fmt.Sprintf("%s:%d", c.Source, c.Line))

	explained := false // does some check account for the case's status?
	for _, ch := range e.Checks {
		tc := junitCase{Name: ch.ID, Classname: r.ID + "." + c.ID}
		if ch.Clause != "" {
			tc.Name += " (" + ch.Clause + ")"
		}
		res := &junitResult{Message: ch.Detail, Type: ch.Clause}
		switch ch.Status {
		case StatusFailed:
			tc.Failure = res
			s.Failures++
			explained = explained || c.Status == StatusFailed
		case StatusSkipped:
			tc.Skipped = res
			s.Skipped++
		case StatusUnknown:
			res.Message = "check status unknown: " + ch.Detail
			tc.Error = res
			s.Errors++
			explained = explained || c.Status == StatusUnknown
		}
		s.Cases = append(s.Cases, tc)
	}
	if c.Status == StatusPassed {
		explained = true
	}
	if c.Status == StatusSkipped && len(e.Checks) > 0 {
		explained = true
	}
	if !explained {
		tc := junitCase{Name: "case status", Classname: r.ID + "." + c.ID}
		msg := strings.Join(c.Reasons, "; ")
		res := &junitResult{Message: msg, Type: string(c.Status)}
		switch c.Status {
		case StatusFailed:
			tc.Failure = res
			s.Failures++
		case StatusSkipped:
			res.Message = e.SkipReason
			tc.Skipped = res
			s.Skipped++
		default:
			tc.Error = res
			s.Errors++
		}
		s.Cases = append(s.Cases, tc)
	}
	s.Tests = len(s.Cases)
	return s
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
		at(&s.ID)
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
		}
	}
}
