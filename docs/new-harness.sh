#!/usr/bin/env bash
# Runs the walkthrough docs/new-harness.md: every ```sh block of it, in
# order, in one bash with -euo pipefail, in the current directory (which
# must hold bin/sandproof and bin/linux-ARCH/{warden,probe,sandagent}: the repository
# after `make build`). The page is the script, so it cannot rot unnoticed.
# WORK (default: a fresh temporary dir) receives the new manifest, its lock
# and the certify run.
set -euo pipefail
doc="$(cd "$(dirname "$0")" && pwd)/new-harness.md"
script=$(awk '/^```sh$/ { on = 1; next } /^```$/ { on = 0 } on' "$doc")
if [ -z "$script" ]; then
	echo "new-harness.sh: no sh blocks in $doc" >&2
	exit 1
fi
exec bash -euo pipefail -c "set -x; $script"
