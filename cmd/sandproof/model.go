package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandproof/sandproof/runner/model"
)

func init() { addCommand(newModelCmd) }

func newModelCmd(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "model",
		Short: "The scripted model server (Chat Completions, Responses, Messages and Gemini on loopback)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newModelServeCmd(stdout, stderr))
	return cmd
}

func newModelServeCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		addr, script, logPath, keyFile, prefer, shellPrefix string
		stallMax                                            time.Duration
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the scripted model until INT or TERM; prints the base URL first",
		Long: `Serve the scripted model on loopback. The first line on stdout is the base URL
(http://127.0.0.1:PORT/v1) to configure a harness with (Gemini's clients are given
http://127.0.0.1:PORT and put /v1beta in the path themselves). The default script does
the certification task: for a challenge prompt, a tool call that reads the
challenge, then the write of a token derived from it, then "done" (--script
challenge forces it); otherwise one tool call that writes the prompt's token,
then "done" (--script prompt-token forces it; given a challenge prompt it
follows the prompt's words as a real model would: read the challenge, write
proof- and the challenge). --script answers a fault instead: 429, 400 (context_length_exceeded), 500, stall
or malformed, to every request or, as in "429@1" or "500@1,2", to those requests
only; "429@task" answers it to the first request that carries the task (tools
and the challenge prompt) and "400@result" to the first that carries the
challenge's tool result ("429@task:1,2": the first two), the requests that carry
neither answered normally and not counted (what model-429 and model-400 use).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := model.CheckLoopback(addr); err != nil {
				return usagef("--addr: bad value %q: %v", addr, errors.Unwrap(err))
			}
			sc, err := model.ParseScript(script)
			if err != nil {
				return usagef("--script: bad value %q", script)
			}
			if prefer != string(model.PreferWrite) && prefer != string(model.PreferShell) {
				return usagef("--prefer: bad value %q (want write or shell)", prefer)
			}
			if stallMax <= 0 {
				return usagef("--stall-max: bad value %q", stallMax.String())
			}
			opts := model.Options{Addr: addr, Script: sc, LogPath: logPath, Prefer: model.Preference(prefer),
				StallMax: stallMax, ShellPrefix: shellPrefix}
			if keyFile != "" {
				b, err := os.ReadFile(keyFile)
				if err != nil {
					return fmt.Errorf("read API key: %w", err)
				}
				opts.APIKey = strings.TrimSpace(string(b))
				if opts.APIKey == "" {
					return usagef("--api-key-file: %q holds no key", keyFile)
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return serveModel(ctx, stdout, stderr, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", "127.0.0.1:0", "listen address; must be on the loopback")
	f.StringVar(&script, "script", "default", "default, challenge, prompt-token, or a fault: 429, 400, 500, stall or malformed, optionally @N[,M] for those requests only")
	f.StringVar(&logPath, "log", "", "append one JSON line per call to this file")
	f.StringVar(&keyFile, "api-key-file", "", "require the key in this file (Authorization: Bearer, x-api-key as the Messages API sends it, or x-goog-api-key or ?key= as Gemini's do)")
	f.StringVar(&prefer, "prefer", "write", "tool used when both a shell and a write tool are declared: write or shell")
	f.StringVar(&shellPrefix, "shell-prefix", "", "shell command run before writing the deliverable (forces the shell tool)")
	f.DurationVar(&stallMax, "stall-max", 60*time.Second, "longest a stall holds a request")
	return cmd
}

// serveModel runs the server until ctx ends. The key is never printed: a
// fingerprint names it on stderr.
func serveModel(ctx context.Context, stdout, stderr io.Writer, opts model.Options) error {
	srv, err := model.Start(opts)
	if err != nil {
		return fmt.Errorf("start model server: %w", err)
	}
	fmt.Fprintln(stdout, srv.URL())
	if opts.APIKey != "" {
		fmt.Fprintf(stderr, "sandproof: model: requiring API key %s\n", model.Fingerprint(opts.APIKey))
	}
	fmt.Fprintf(stderr, "sandproof: model: script %s\n", opts.Script)
	<-ctx.Done()
	if err := srv.Close(); err != nil {
		return fmt.Errorf("stop model server: %w", err)
	}
	fmt.Fprintf(stderr, "sandproof: model: %d model calls\n", srv.ModelCalls())
	return nil
}
