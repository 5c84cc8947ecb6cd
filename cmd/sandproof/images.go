package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sandproof/sandproof/runner/host/images"
	"github.com/sandproof/sandproof/runner/host/provider"
)

func init() { addCommand(newImagesCmd) }

// imagesFlags are shared by every images subcommand.
type imagesFlags struct {
	mappings []string
	docker   string
}

// overrides parses the --image NAME=REF flags.
func (f *imagesFlags) overrides() (map[string]string, error) {
	m := map[string]string{}
	for _, v := range f.mappings {
		name, ref, err := images.ParseMapping(v)
		if err != nil {
			return nil, usagef("--image: bad value %q (want NAME=REF, e.g. alpine-class=alpine:3.20)", v)
		}
		m[name] = ref
	}
	return m, nil
}

// resolve returns the images, with the --image overrides applied.
func (f *imagesFlags) resolve() ([]images.Image, error) {
	ov, err := f.overrides()
	if err != nil {
		return nil, err
	}
	return images.Resolve(ov)
}

func (f *imagesFlags) engine(ctx context.Context) (images.Engine, error) {
	e := images.Engine{Docker: f.docker}
	if _, err := e.Ping(ctx); err != nil {
		return e, err
	}
	return e, nil
}

func newImagesCmd(stdout, stderr io.Writer) *cobra.Command {
	f := &imagesFlags{}
	cmd := &cobra.Command{
		Use:   "images",
		Short: "Build, list and clean up the task images (debian-12, alpine-class, old-python)",
		Long: `The task images are built here from Debian's packages and tagged
sandproof/NAME:HASH12, HASH being the content hash of the recipe, so an image
that is already built is never built again. --image NAME=REF maps a name to any
other reference (an image loaded from a registry, say) instead.`,
	}
	cmd.PersistentFlags().StringArrayVar(&f.mappings, "image", nil, "map an image name to a reference, NAME=REF (repeatable)")
	cmd.PersistentFlags().StringVar(&f.docker, "docker", "", "docker CLI to use (default: docker on PATH)")
	cmd.AddCommand(newImagesBuildCmd(stdout, stderr, f), newImagesListCmd(stdout, stderr, f), newImagesCleanCmd(stdout, stderr, f))
	return cmd
}

// caught is the signal that cancelled a signalContext, for the exit
// status (130 or 143 rather than the error the cancelled work returned).
var caught atomic.Value

// signalContext is cancelled by INT or TERM, so a build interrupted by the
// user kills its mmdebstrap instead of leaving it running.
func signalContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	base := cmd.Context()
	if base == nil {
		base = context.Background()
	}
	ctx, cancel := context.WithCancel(base)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-ch:
			caught.Store(s)
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(ch); cancel() }
}

func newImagesBuildCmd(stdout, stderr io.Writer, f *imagesFlags) *cobra.Command {
	var only, mirror, workDir string
	var force bool
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Build the images the engine does not have yet",
		Long: `Build every image whose tag the engine lacks (or only --only NAME).
Progress goes to stderr, one line per timed step; stdout gets one line per
image: NAME REF built|up-to-date|mapped SECONDS.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			all, err := f.resolve()
			if err != nil {
				return err
			}
			var todo []images.Image
			for _, img := range all {
				if only == "" || img.Name == only {
					todo = append(todo, img)
				}
			}
			if len(todo) == 0 {
				var names []string
				for _, img := range all {
					names = append(names, img.Name)
				}
				return usagef("--only: bad value %q (images: %s)", only, strings.Join(names, ", "))
			}
			ctx, cancel := signalContext(cmd)
			defer cancel()
			e, err := f.engine(ctx)
			if err != nil {
				return err
			}
			var failed []string
			for _, img := range todo {
				if img.Recipe == nil {
					_, found, err := e.Inspect(ctx, img.Ref)
					switch {
					case err != nil:
						return err
					case found:
						fmt.Fprintf(stdout, "%s %s mapped 0.0\n", img.Name, img.Ref)
					default:
						fmt.Fprintf(stderr, "images: %s: %s is not in the engine and is not built here; load it first\n", img.Name, img.Ref)
						failed = append(failed, img.Name)
					}
					continue
				}
				res, err := images.Build(ctx, e, *img.Recipe, images.BuildOptions{Mirror: mirror, WorkDir: workDir, Log: stderr, Force: force})
				if err != nil {
					fmt.Fprintf(stderr, "images: %s: %v\n", img.Name, err)
					failed = append(failed, img.Name)
					if ctx.Err() != nil {
						break
					}
					continue
				}
				state := "up-to-date"
				if res.Built {
					state = "built"
				}
				fmt.Fprintf(stdout, "%s %s %s %.1f\n", res.Name, res.Ref, state, res.Seconds)
			}
			if len(failed) > 0 {
				return fmt.Errorf("build images: %s failed", strings.Join(failed, ", "))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&only, "only", "", "build only this image")
	cmd.Flags().BoolVar(&force, "force", false, "rebuild even when the engine has the image")
	cmd.Flags().StringVar(&mirror, "mirror", images.DefaultMirror, "Debian mirror")
	cmd.Flags().StringVar(&workDir, "work-dir", "/var/tmp", "where scratch dirs and lock files go")
	return cmd
}

func newImagesListCmd(stdout, stderr io.Writer, f *imagesFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "Print one line per image: NAME REF ID SIZE bash=.. python3=.. os=.. (or missing)",
		Long: `Print one line per image:

  NAME REF ID SIZE bash=PATH|none python3=VERSION|none os=ID-VERSION_ID

or "NAME REF missing" when the engine lacks it. bash, python3 and os come from
a look inside the image with its own shell (a throwaway container, no network).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			all, err := f.resolve()
			if err != nil {
				return err
			}
			ctx, cancel := signalContext(cmd)
			defer cancel()
			e, err := f.engine(ctx)
			if err != nil {
				return err
			}
			for _, img := range all {
				info, found, err := e.Inspect(ctx, img.Ref)
				if err != nil {
					return err
				}
				if !found {
					fmt.Fprintf(stdout, "%s %s missing\n", img.Name, img.Ref)
					continue
				}
				id := strings.TrimPrefix(info.ID, "sha256:")
				if len(id) > 12 {
					id = id[:12]
				}
				facts, err := e.Facts(ctx, img.Ref)
				if err != nil {
					fmt.Fprintf(stdout, "%s %s %s %s facts=unavailable\n", img.Name, img.Ref, id, images.HumanSize(info.Size))
					fmt.Fprintf(stderr, "images: %s: %v\n", img.Name, err)
					continue
				}
				py := "none"
				if facts.Python3 != "none" {
					py = strings.TrimPrefix(facts.Python3Version, "Python ")
					if py == "" {
						py = "unknown"
					}
				}
				fmt.Fprintf(stdout, "%s %s %s %s bash=%s python3=%s os=%s\n",
					img.Name, img.Ref, id, images.HumanSize(info.Size), facts.Bash, py, facts.OS)
			}
			return nil
		},
	}
}

func newImagesCleanCmd(stdout, stderr io.Writer, f *imagesFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "clean",
		Short: "Same as `sandproof clean` (kept for scripts): containers are cleaned in one place",
		Long: `Containers are removed by one command only, sandproof clean; this one runs
it with its default scope: the containers of this host whose owning process
is gone. It removes no images (sandproof images build replaces an image whose
recipe changed). Before the owner labels existed it removed every container
labelled sandproof=1, other runs' in the middle of their cases included; for
that, run sandproof clean --all-hosts.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := f.overrides(); err != nil {
				return err
			}
			fmt.Fprintln(stderr, "images clean: running `sandproof clean` (this host's containers whose owner is gone)")
			return cleanContainers(cmd.Context(), stdout, provider.DefaultName, provider.CleanScope{}, false)
		},
	}
}
