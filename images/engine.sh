#!/usr/bin/env bash
# engine.sh start|stop|status — make sure a Docker engine runs for the image
# builds and the suite, without touching an engine somebody else started.
#
# start: install what is missing (images/prereqs.sh: docker.io, mmdebstrap
#   and the tests' packages); if `docker info` already answers, do nothing
#   more. Otherwise start dockerd in the background with no bridge and no
#   iptables (containers run with --network none or host only), remember its
#   pid and start time, and wait until `docker info` answers.
# stop: stop only the dockerd this script started (pid and start time must
#   both match, so a reused pid is never signalled).
# status: exit 0 when the engine answers, 3 when it does not.
#
# SANDPROOF_ENGINE_DIR (default /var/tmp/sandproof-engine) holds dockerd.pid
# and dockerd.log; SANDPROOF_ENGINE_WAIT (default 60) bounds each wait, in s.
set -euo pipefail

dir=${SANDPROOF_ENGINE_DIR:-/var/tmp/sandproof-engine}
wait_s=${SANDPROOF_ENGINE_WAIT:-60}
pidfile=$dir/dockerd.pid
log=$dir/dockerd.log

# start_time, ours, wait_until, gone.
source "$(dirname "${BASH_SOURCE[0]}")/engine-common.sh"

say() { printf 'engine: %s\n' "$*" >&2; }

answers() { docker info >/dev/null 2>&1; }

start() {
	# The engine, mmdebstrap and the rest come from the one list.
	bash "$(dirname "${BASH_SOURCE[0]}")/prereqs.sh" --quiet
	if answers; then
		say "already running ($(docker info --format '{{.ServerVersion}}' 2>/dev/null))"
		return 0
	fi
	command -v docker >/dev/null || { say "no docker CLI after install"; return 1; }
	mkdir -p "$dir"
	if pid=$(ours); then
		say "dockerd $pid is running but does not answer yet"
	else
		# setsid: the engine must outlive this shell and the caller's
		# process group (a test run that kills its group must not stop it).
		setsid dockerd --bridge=none --iptables=false --ip6tables=false \
			</dev/null >>"$log" 2>&1 &
		pid=$!
		st=$(start_time "$pid") || { say "dockerd exited at once; see $log"; return 1; }
		printf '%s %s\n' "$pid" "$st" >"$pidfile"
		say "started dockerd pid $pid, log $log"
	fi
	if ! wait_until "$wait_s" answers; then
		say "dockerd did not answer within ${wait_s}s; see $log"
		tail -n 20 "$log" >&2 || true
		return 1
	fi
	say "running ($(docker info --format '{{.ServerVersion}}'))"
}

stop() {
	local pid
	if ! pid=$(ours); then
		rm -f "$pidfile"
		if answers; then
			say "an engine runs that this script did not start; leaving it alone"
		else
			say "not running"
		fi
		return 0
	fi
	say "stopping dockerd pid $pid"
	kill -TERM "$pid"
	if ! wait_until "$wait_s" gone "$pid"; then
		say "dockerd pid $pid ignored TERM for ${wait_s}s; sending KILL"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$pidfile"
	say "stopped"
}

status() {
	if answers; then
		local pid
		if pid=$(ours); then
			say "running, started by this script (pid $pid)"
		else
			say "running, started elsewhere"
		fi
		return 0
	fi
	say "not running"
	return 3
}

case ${1:-} in
start) start ;;
stop) stop ;;
status) status ;;
*)
	echo "usage: engine.sh start|stop|status" >&2
	exit 2
	;;
esac
