package certify

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"time"

	"github.com/sandproof/sandproof/runner/host/engine"
	"github.com/sandproof/sandproof/runner/host/provider"
)

// Baseline is the floor a case's overhead is read against: the time of a
// bare `docker run --rm --network none IMAGE true` of the case's image,
// run by the docker CLI on the same engine in the same run (contract §9
// engine). The overhead goal (under 1 s per fixture case) is a ratio to
// it, since the machines certify runs on are shared and noisy.
type Baseline struct {
	Image string
	// Seconds are the runs' times; Median their median.
	Seconds []float64
	Median  float64
	// Err says why there is no figure (no docker CLI, a failed run).
	Err string
}

// measureBaselines times runs bare runs of every image, before the cases
// start, on the engine the provider reaches.
func (r *runner) measureBaselines(ctx context.Context, runs int) []Baseline {
	if runs <= 0 || r.prov.Name() != "docker" {
		return nil
	}
	var out []Baseline
	for _, img := range r.opts.Images {
		b := Baseline{Image: img.Name}
		for i := 0; i < runs && b.Err == ""; i++ {
			secs, err := bareRun(ctx, img.Ref, r.opts.ownerDeadline())
			if err != nil {
				b.Err = err.Error()
				break
			}
			b.Seconds = append(b.Seconds, secs)
		}
		if len(b.Seconds) > 0 {
			b.Median = Median(b.Seconds)
		}
		if b.Err != "" {
			r.progress("baseline %s: %s", img.Name, b.Err)
		} else {
			r.progress("baseline %s: bare `docker run --rm --network none IMAGE true` median %.2fs of %d", img.Name, b.Median, len(b.Seconds))
		}
		out = append(out, b)
	}
	return out
}

// bareRun times one `docker run --rm --network none IMAGE true` through
// the docker CLI, with the engine every other part of sandproof reaches;
// a run past the owner's deadline d is killed and leaves no figure.
func bareRun(ctx context.Context, ref string, d time.Duration) (float64, error) {
	dctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	ep, err := engine.Default()
	if err != nil {
		return 0, err
	}
	cli, err := exec.LookPath("docker")
	if err != nil {
		return 0, fmt.Errorf("no docker CLI on PATH: no baseline")
	}
	cmd := exec.CommandContext(dctx, cli, "run", "--rm", "--network", provider.NetworkNone, ref, "true")
	cmd.Env = ep.Env(os.Environ())
	t := time.Now()
	out, err := cmd.CombinedOutput()
	secs := time.Since(t).Seconds()
	if err != nil && ctx.Err() == nil && dctx.Err() != nil {
		return 0, fmt.Errorf("docker run --rm %s true: not ended within %s (the owner's deadline)", ref, d)
	}
	if err != nil {
		return 0, fmt.Errorf("docker run --rm %s true: %v: %s", ref, err, out)
	}
	return secs, nil
}

// Median is the median of v (0 for none).
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
