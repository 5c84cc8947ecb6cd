package stop

import (
	"errors"

	"github.com/sandproof/sandproof/runner/warden/mutant"
	"github.com/sandproof/sandproof/runner/warden/proc"
)

// ErrMoved means the tree changed while it was read: a listed process was
// gone (exited and reaped) before its stat was read, or its pid was taken
// by a process that is not a child of the tree (reaped and reused in
// between).
var ErrMoved = errors.New("the tree moved while it was read")

// Node is one process the kernel's children lists showed, with the parent
// whose list it was in.
type Node struct {
	Member
	PPID int
	// stat is the reading the node was made from: whether it is dead
	// depends on its thread count too, not on its letter alone (a leader
	// that called pthread_exit shows Z while its threads run).
	stat proc.Stat
}

// Dead reports whether every thread of the process had exited when it was
// read (proc.Stat.Dead): a zombie leader with a live thread is alive.
func (n Node) Dead() bool { return n.stat.Dead() }

// Walk reads the supervisor's tree from the kernel: the children lists of
// every thread of the supervisor (PROC_ROOT/SELF/task/*/children), then of
// every child, down. The supervisor is a child subreaper, so every process
// forked from the harness's tree is in it, whatever it did to its session,
// group or environment, as long as it lives. skip names pids (services and
// their subtrees) not to enter. A supervisor with no entry in the proc root
// (a fake tree that does not list it) has no tree; a kernel without
// children lists gives proc.ErrNoChildrenList.
//
// A child listed but gone before its stat could be read makes Walk return
// ErrMoved along with what it read: it may have handed a child of its own
// to the supervisor after the supervisor's list was read, so the reading
// cannot vouch for the whole tree. So does a listed pid whose stat names a
// parent outside the tree (see parentInTree): the child was reaped and its
// pid reused by an unrelated process between the list and the stat, and
// that newcomer is not entered, not listed and never signalled.
func (s *Scanner) Walk(skip map[int]bool) ([]Node, error) {
	nodes, err := s.walk(s.Launch.Self, skip, nil, nil, false)
	if err == nil && s.vanished > 0 {
		err = ErrMoved
	}
	return nodes, err
}

// walkFrom is a walk from another root (a service), ignoring errors: what
// it cannot read is still found through the stat parent links.
func (s *Scanner) walkFrom(root int) []Node {
	nodes, _ := s.walk(root, nil, nil, nil, true)
	return nodes
}

// walk visits every process below root, breadth first, calling visit (when
// set) on each as soon as its stat is read, so a caller can signal it
// before its parent's next fork. Dead zombies are listed but not entered:
// the kernel handed their children on before they died. A zombie leader
// with live threads is entered: its threads keep their children and fork. known, when set, holds
// stats read this round, used instead of reading them again; fast reads a
// single-threaded process's one children list without listing its threads
// (see proc.FS.ChildrenOf). The reading that confirms a cleanup uses
// neither.
func (s *Scanner) walk(root int, skip map[int]bool, visit func(Node), known map[int]proc.Stat, fast bool) ([]Node, error) {
	var out []Node
	s.vanished = 0
	seen := map[int]bool{root: true}
	// tree holds the pids whose stat this walk read and took in: a listed
	// child's stat must name one of them (or the supervisor) as its parent.
	tree := map[int]bool{root: true, s.Launch.Self: true}
	type item struct {
		st   proc.Stat
		full bool
	}
	queue := []item{{st: proc.Stat{PID: root}, full: true}}
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		var kids []int
		var err error
		if fast && !it.full {
			kids, err = s.FS.ChildrenOf(it.st)
		} else {
			kids, err = s.FS.Children(it.st.PID)
		}
		switch {
		case errors.Is(err, proc.ErrGone):
			continue // it died: its children went to the supervisor, read next time
		case err != nil:
			return out, err
		}
		p := it.st.PID
		for _, c := range kids {
			if seen[c] || c == s.Launch.Self || skip[c] {
				continue
			}
			seen[c] = true
			st, ok := known[c]
			if !ok || st.Dead() || !parentInTree(st, p, tree) {
				if st, err = s.FS.Stat(c); err != nil {
					s.vanished++ // gone between the list and the stat
					continue
				}
				if !parentInTree(st, p, tree) {
					s.vanished++ // reaped and its pid reused between the list and the stat
					continue
				}
			}
			tree[c] = true
			why := WhyDescendant
			if p == s.Launch.Self {
				why = WhyOrphan
			}
			n := Node{Member: Member{PID: c, StartTime: st.StartTime, Comm: st.Comm, Why: why, State: string(st.State)}, PPID: p, stat: st}
			out = append(out, n)
			if visit != nil {
				visit(n)
			}
			if !st.Dead() {
				queue = append(queue, item{st: st})
			}
		}
	}
	return out, nil
}

// parentInTree reports whether a stat read for a pid that lister's
// children list named can be the listed child: its parent is the lister,
// or, if the lister exited after its list was read, the process the child
// was handed to, which is the supervisor (the child subreaper) or a
// subreaper below it, i.e. a process of the tree already taken in (an
// ancestor is always visited before its descendants). Any other parent
// means the listed child was reaped and its pid reused by a process
// outside the tree. A known stat read before the list may fail this for a
// pid reused the other way (an outsider then, the child now): it is read
// again.
func parentInTree(st proc.Stat, lister int, tree map[int]bool) bool {
	if mutant.Is(mutant.NoParentCheck) {
		return true
	}
	return st.PPID == lister || tree[st.PPID]
}

// treeRoots are where a hold walks from: the supervisor, or for a stop of
// the services each live service.
func (s *Scanner) treeRoots() []int {
	if mutant.Is(mutant.NoKernelWalk) {
		return nil
	}
	if !s.ServicesOnly {
		return []int{s.Launch.Self}
	}
	var roots []int
	for _, svc := range s.Launch.Services {
		if st, err := s.FS.Stat(svc.PID); err == nil && st.StartTime == svc.StartTime {
			roots = append(roots, svc.PID)
		}
	}
	return roots
}
