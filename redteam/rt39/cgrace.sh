#!/bin/sh
# Red team rt39: does warden's grace-0 stop in tier cgroup (cgroupFirst:
# read cgroup.procs, stat each, cgroup.kill, list as reached the members
# the kill ended) list every process its kill ended? The harness forks
# short-lived children without pause (at most 4,000, each 0.3 s: a
# bounded population of about a hundred); each child logs "s PID" when it
# starts and "e PID" when it ends by itself. A child with an "s" and no
# "e" was ended by the stop; every such child must be in the receipt's
# reached. Run as root on a host with a writable cgroup2 (tier cgroup).
# Usage: cgrace.sh WARDEN WORKDIR
set -eu
warden=$1 dir=$2
rm -rf "$dir"; mkdir -p "$dir"
cat > "$dir/harness.sh" <<'H'
#!/bin/sh
f=$1 i=0
while [ $i -lt 4000 ]; do
	sh -c 'echo "s $$" >> "$0"; sleep 0.3 && echo "e $$" >> "$0"' "$f" &
	i=$((i + 1))
done
wait
H
chmod +x "$dir/harness.sh"
"$warden" supervise --state "$dir/state" --deadline 60 --grace 0 --detach -- "$dir/harness.sh" "$dir/log" > "$dir/detach.json"
sleep 1.5
"$warden" stop --state "$dir/state" --wait 20 > "$dir/receipt.json" || true
python3 - "$dir" <<'P'
import json, sys, os
d = sys.argv[1]
r = json.load(open(os.path.join(d, "receipt.json")))
started, ended = set(), set()
for line in open(os.path.join(d, "log")):
    k, _, p = line.strip().partition(" ")
    (started if k == "s" else ended).add(int(p))
killed = started - ended
reached = {m["pid"] for m in r.get("reached", [])}
missing = sorted(killed - reached)
print("tier", r.get("tier"), "cause", r.get("cause"), "confirmed", r.get("cleanup_confirmed"))
print("children started", len(started), "ended by themselves", len(ended), "ended by the stop", len(killed))
print("reached", len(reached), "ended by the stop and not reached", len(missing), missing[:20])
P
grep -i "cgroup" "$dir/state/supervisor.log" | tail -3
