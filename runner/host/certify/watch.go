package certify

import "github.com/sandproof/sandproof/reports"

// Watcher is told how the run's cases go, for a live status line
// (runner/host/statusline); certify's plain progress lines go to Progress
// as before. Its methods are called from the case workers at once, so it
// must be safe for concurrent use.
type Watcher interface {
	// Planned gives the number of cases this run will run (those --resume
	// found final are not counted).
	Planned(cases int)
	// CaseStarted and CaseEnded bracket one case, by its case id.
	CaseStarted(id string)
	CaseEnded(id string, status reports.Status)
}

// noWatcher is the Watcher of a run that has none.
type noWatcher struct{}

func (noWatcher) Planned(int)                      {}
func (noWatcher) CaseStarted(string)               {}
func (noWatcher) CaseEnded(string, reports.Status) {}

// watcher is Options.Watcher, or one that is told nothing.
func (r *runner) watcher() Watcher {
	if r.opts.Watcher == nil {
		return noWatcher{}
	}
	return r.opts.Watcher
}
