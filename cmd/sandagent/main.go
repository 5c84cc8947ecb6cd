// Command sandagent is the session agent: a small static binary the host
// starts inside a sandbox as `sandagent serve` (as root), over one
// long-lived exec whose stdin and stdout are the channel. Over it the host
// runs commands, puts and gets archives, and receives the connections
// accepted on --listen (the sandbox's loopback, its only network), which
// it forwards where it chooses. It is neither warden nor the probe: of
// their code it links only warden's version stamp (runner/warden/version),
// and nothing of the host (runner/host/agenthost is the host's end of the
// channel; runner/layers_test.go checks what this binary links).
// runner/agent says how the channel works.
//
//	sandagent serve [--listen 127.0.0.1:PORT] [--root DIR] [--window BYTES]
//	sandagent version
//
// Exit status: 0 when the host ended the channel, 1 when it broke, 2 on
// bad usage.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"

	"github.com/sandproof/sandproof/runner/agent"
	"github.com/sandproof/sandproof/runner/warden/version"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, stdin io.Reader, stdout io.Writer, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: sandagent serve [--listen ADDR] [--root DIR] [--window BYTES] | sandagent version")
		return 2
	}
	switch args[0] {
	case "version":
		fmt.Fprintf(stdout, "sandagent %s (protocol %d)\n", version.Commit, agent.Version)
		return 0
	case "serve":
	default:
		fmt.Fprintf(stderr, "sandagent: unknown command %q (want serve or version)\n", args[0])
		return 2
	}
	fl := flag.NewFlagSet("sandagent serve", flag.ContinueOnError)
	fl.SetOutput(stderr)
	listen := fl.String("listen", "", "accept tunnel connections on this address (host:port)")
	root := fl.String("root", "/", "directory the paths of put and get are under")
	window := fl.String("window", "0", "per-stream credit in bytes (0 = the default)")
	if err := fl.Parse(args[1:]); err != nil {
		return 2
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "sandagent serve: unexpected argument %q\n", fl.Arg(0))
		return 2
	}
	w, err := strconv.ParseUint(*window, 10, 31)
	if err != nil || (w != 0 && w < agent.MaxPayload) {
		fmt.Fprintf(stderr, "sandagent serve: --window %q: want 0 or a byte count of at least %d\n", *window, agent.MaxPayload)
		return 2
	}
	if fi, err := os.Stat(*root); err != nil || !fi.IsDir() {
		fmt.Fprintf(stderr, "sandagent serve: --root %q: not a directory\n", *root)
		return 2
	}
	opt := agent.ServeOptions{Root: *root, Window: uint32(w)}
	if *listen != "" {
		if _, _, err := net.SplitHostPort(*listen); err != nil {
			fmt.Fprintf(stderr, "sandagent serve: --listen %q: want host:port (%v)\n", *listen, err)
			return 2
		}
		l, err := net.Listen("tcp", *listen)
		if err != nil {
			fmt.Fprintf(stderr, "sandagent serve: --listen %q: %v\n", *listen, err)
			return 1
		}
		defer l.Close()
		opt.Listener = l
	}
	err = agent.Serve(stdin, stdout, opt)
	if err != nil && !errors.Is(err, io.EOF) && !isEOFEnd(err) {
		fmt.Fprintf(stderr, "sandagent: %v\n", err)
		return 1
	}
	return 0
}

// isEOFEnd: the host closing stdin ends the channel with EOF: the normal
// end.
func isEOFEnd(err error) bool { return agent.IsEOF(err) }
