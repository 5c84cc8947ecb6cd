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
// rm when no rmtree helper was uploaded: it refuses a pattern whose
// directory is not a plain one (a link the harness made there would
// steer rm anywhere), globs in that directory, and prints each path it
// removed. The patterns come as arguments, never inside the script.
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
// as root, after the launches stopped and before the session dir (and
// the rmtree helper in it) goes, and returns the paths it removed.
func (s *Session) removeScratch(ctx context.Context) ([]string, error) {
	if len(s.adapter.Scratch) == 0 {
		return nil, nil
	}
	pats := make([]string, len(s.adapter.Scratch))
	for i, p := range s.adapter.Scratch {
		pats[i] = s.x(p)
	}
	argv := append([]string{"sh", "-c", scratchScript, "sh"}, pats...)
	if _, ok := s.cfg.Binaries.Rmtree[s.arch]; ok {
		argv = append([]string{s.x(path.Join(s.dir, "bin", "rmtree")), "--scratch"}, pats...)
	}
	r, err := s.sb.Exec(ctx, provider.ExecSpec{Argv: argv, User: "0"})
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
		return removed, fmt.Errorf("remove scratch %q with %s: exit %d: %s: %w", s.adapter.Scratch, argv[0], r.ExitCode, firstLine(r.Stderr), ErrScratchNotRemoved)
	}
	return removed, nil
}
