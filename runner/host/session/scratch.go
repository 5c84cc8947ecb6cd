package session

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/sandproof/sandproof/runner/host/provider"
)

// ErrScratchNotRemoved is wrapped when close could not remove an
// adapter's scratch paths.
var ErrScratchNotRemoved = errors.New("adapter scratch not removed")

// scratchScript removes each pattern's matches with the image's sh and
// rm, run as the harness's own user (never root) when the sandbox has no
// confined remover: it refuses a pattern whose directory is not a plain
// one, globs in that directory, and prints each path it removed. A check
// by path and a removal by path can be steered between the two by a link
// the harness swaps in (issue 35), so this route has no more rights than
// the harness: whatever a link leads it to, the harness could remove
// itself. The patterns come as arguments, never inside the script.
const scratchScript = `st=0
for p do
  d=${p%/*}; b=${p##*/}; [ -n "$d" ] || d=/
  [ -d "$d" ] || continue
  if [ "$(cd -P -- "$d" && pwd -P)" != "$d" ]; then echo "refuse $p: its directory is not a plain directory" >&2; st=1; continue; fi
  cd -- "$d" || { st=1; continue; }
  for m in $b; do
    [ -e "$m" ] || [ -L "$m" ] || continue
    if rm -rf -- "$m"; then echo "${d%/}/$m"; else st=1; fi
  done
done
exit $st`

// removeScratch removes the adapter's scratch paths (Adapter.Scratch)
// after the launches stopped and before the session dir (and the rmtree
// helper in it) goes, and returns the paths it removed: as root with the
// confined primitive when the sandbox has it (confinedRemove), else with
// the image's sh and rm as the harness's own user.
func (s *Session) removeScratch(ctx context.Context) ([]string, error) {
	if len(s.adapter.Scratch) == 0 {
		return nil, nil
	}
	r, by, ok, err := s.confinedRemove(ctx, append([]string{"--scratch"}, s.adapter.Scratch...))
	if !ok {
		pats := make([]string, len(s.adapter.Scratch))
		for i, p := range s.adapter.Scratch {
			pats[i] = s.x(p)
		}
		by = "the image's sh and rm as " + orElse(s.cfg.User, "the provider's user")
		r, err = s.sb.Exec(ctx, provider.ExecSpec{Argv: append([]string{"sh", "-c", scratchScript, "sh"}, pats...), User: s.cfg.User})
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, l := range strings.Split(strings.TrimSpace(string(r.Stdout)), "\n") {
		if l != "" {
			removed = append(removed, strings.TrimPrefix(l, s.prefix))
		}
	}
	slices.Sort(removed)
	if r.ExitCode != 0 {
		return removed, fmt.Errorf("remove scratch %q with %s: exit %d: %s: %w", s.adapter.Scratch, by, r.ExitCode, firstLine(r.Stderr), ErrScratchNotRemoved)
	}
	return removed, nil
}

// confinedRemove runs the confined primitive's removal (runner/confine)
// of args, the rmtree helper's arguments with sandbox paths (DIR, or
// --scratch PATTERN...), as root in the sandbox: over the session agent
// when the sandbox is one (provider.Remover), else with the rmtree helper
// seed uploaded. by names which; ok is false when there is neither, and
// nothing ran.
func (s *Session) confinedRemove(ctx context.Context, args []string) (r provider.ExecResult, by string, ok bool, err error) {
	if rm, ok := provider.As[provider.Remover](s.sb); ok {
		r, err := rm.Remove(ctx, args)
		return r, "the session agent", true, err
	}
	if _, ok := s.cfg.Binaries.Rmtree[s.arch]; !ok {
		return provider.ExecResult{}, "", false, nil
	}
	argv := []string{s.x(path.Join(s.dir, "bin", "rmtree"))}
	for _, a := range args {
		if path.IsAbs(a) {
			a = s.x(a)
		}
		argv = append(argv, a)
	}
	r, err = s.sb.Exec(ctx, provider.ExecSpec{Argv: argv, User: "0"})
	return r, "the rmtree helper", true, err
}

// orElse is s, or otherwise when s is "".
func orElse(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}
