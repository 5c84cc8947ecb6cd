#!/bin/sh
# Red team rt39's certify runs, one at a time under the Docker lock, on
# debian-12. BIN is the sandproof under test (main's build, or the
# branch's for the fix); OUT collects each run's dir and its output.
# Usage: run.sh BIN OUT NAME MANIFEST SCENARIO
set -u
bin=$1 out=$2 name=$3 manifest=$4 scenario=$5
mkdir -p "$out"
ulimit -f 2000000
flock /work/brief/docker.lock "$bin" certify --adapter "$manifest" --image debian-12 --scenario "$scenario" --out "$out/$name" > "$out/$name.out" 2>&1
echo "exit $?" >> "$out/$name.out"
tail -n 3 "$out/$name.out"
