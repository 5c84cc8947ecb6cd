#!/usr/bin/env bash
# engine2.sh start|stop|status|env|load|purge|run — a second Docker engine
# on this machine that stands in for a remote host (issue 15): whatever
# sandproof does that only works because the engine shares this machine's
# files fails against it, as it would against a real remote engine.
#
# It runs in a mount namespace of its own (unshare --mount, private
# propagation) in which these are empty tmpfs mounts, so a bind mount of a
# host path there shows an empty directory, or none:
#   /tmp, /var/tmp, $TMPDIR       (os.MkdirTemp: certify's work dir, t.TempDir)
#   $HOME                         (~/.cache, ~/.npm, ~/.docker)
#   ${XDG_CACHE_HOME:-~/.cache}   (os.UserCacheDir: runtimes.DefaultCacheDir)
#   $SANDPROOF_RUNTIME_CACHE      (the runtimes' cache when set)
#   the checkout this script is in (bin/linux-*/warden and probe)
#   /run/containerd               (so it never attaches to another engine's
#                                  containerd; its shims' sockets stay private)
# Its identity key is its own (DIR/key.json: the engine id `docker info`
# reports is derived from it, and with the default /etc/docker/key.json both
# engines would have one id). Its data root is an ext4 file (DIR/disk.img) loop-mounted on DIR/data
# inside that namespace only, so the host cannot read its overlay dirs (the
# host sees an empty DIR/data); its exec root and pidfile are a tmpfs on
# DIR/exec there; its containerd is its own (no --containerd). No bridge,
# no iptables, cgroup parent sandproof-engine2, and it listens only on
# tcp://127.0.0.1:PORT.
#
# start: start it in the background (setsid), remember its pid and start
#   time, wait until it answers, and print the DOCKER_HOST to use.
# stop: stop only the dockerd this script started (pid and start time must
#   both match); its data (loaded images) stays in DIR for the next start.
# status: exit 0 when it answers, 3 when it does not.
# env: print `export DOCKER_HOST=tcp://127.0.0.1:PORT`.
# load [REF...]: stream images from the main engine into it (docker save |
#   docker load, no file in between); default: the sandproof/* images.
# purge: stop, then remove DIR.
# run DIR PORT: what start and the Go tests (internal/testsupport/remoteengine)
#   run: set up DIR and the namespace and exec dockerd in the foreground, so
#   the caller's child is dockerd itself.
#
# SANDPROOF_ENGINE2_DIR (default /var/lib/sandproof-engine2/dev; never under
# a hidden dir) holds disk.img, engine2.pid and dockerd.log;
# SANDPROOF_ENGINE2_PORT (default 23751) is its port; SANDPROOF_ENGINE2_SIZE
# (default 32G, sparse) the data root's size; SANDPROOF_ENGINE_WAIT (default
# 60) bounds each wait, in s.
set -euo pipefail

self=$(readlink -f "${BASH_SOURCE[0]}")
dir=${SANDPROOF_ENGINE2_DIR:-/var/lib/sandproof-engine2/dev}
port=${SANDPROOF_ENGINE2_PORT:-23751}
size=${SANDPROOF_ENGINE2_SIZE:-32G}
wait_s=${SANDPROOF_ENGINE_WAIT:-60}

# start_time, ours, wait_until, gone.
source "$(dirname "$self")/engine-common.sh"

say() { printf 'engine2: %s\n' "$*" >&2; }

# hidden: the dirs the engine's namespace covers with an empty tmpfs.
hidden() {
	local checkout
	checkout=$(dirname "$(dirname "$self")")
	printf '%s\n' /tmp /var/tmp /run/containerd
	[[ -n ${TMPDIR:-} ]] && printf '%s\n' "$TMPDIR"
	[[ -n ${HOME:-} && $HOME != / ]] && printf '%s\n' "$HOME"
	if [[ -n ${XDG_CACHE_HOME:-} ]]; then
		printf '%s\n' "$XDG_CACHE_HOME"
	elif [[ -n ${HOME:-} && $HOME != / ]]; then
		printf '%s\n' "$HOME/.cache"
	fi
	[[ -n ${SANDPROOF_RUNTIME_CACHE:-} ]] && printf '%s\n' "$SANDPROOF_RUNTIME_CACHE"
	printf '%s\n' "$checkout"
}

# check_dir DIR: absolute, and not inside a hidden dir (the tmpfs over it
# would hide the data root too).
check_dir() {
	local d=$1 h
	[[ $d == /* ]] || { say "SANDPROOF_ENGINE2_DIR: want an absolute path, got \"$d\""; exit 2; }
	while read -r h; do
		h=${h%/}
		if [[ $d == "$h" || $d == "$h"/* ]]; then
			say "SANDPROOF_ENGINE2_DIR: \"$d\" is inside $h, which the engine's namespace hides; use a dir under /var/lib"
			exit 2
		fi
	done < <(hidden)
}

check_port() {
	[[ $1 =~ ^[0-9]+$ ]] && (($1 > 0 && $1 < 65536)) || { say "SANDPROOF_ENGINE2_PORT: want a port number, got \"$1\""; exit 2; }
}

# run DIR PORT: prepare DIR, enter a new mount namespace, go on in inside.
run() {
	local d=$1 p=$2
	check_dir "$d"
	check_port "$p"
	for cmd in dockerd unshare mkfs.ext4 mount; do
		command -v "$cmd" >/dev/null || { say "no $cmd on PATH"; exit 3; }
	done
	mkdir -p "$d/data" "$d/exec"
	if [[ ! -f $d/disk.img ]]; then
		truncate -s "$size" "$d/disk.img.new"
		mkfs.ext4 -q -F -E nodiscard,lazy_itable_init=1,lazy_journal_init=1 "$d/disk.img.new"
		mv "$d/disk.img.new" "$d/disk.img"
	fi
	# Its own daemon config, whatever /etc/docker/daemon.json says: only
	# its own identity key.
	printf '{"deprecated-key-path": "%s/key.json"}\n' "$d" >"$d/daemon.json"
	exec unshare --mount --propagation private -- "$BASH" "$self" __inside "$d" "$p"
}

# inside DIR PORT: in the new namespace: mount, hide, exec dockerd.
inside() {
	local d=$1 p=$2 h
	# The data root first: hiding dirs must not hide it.
	mount -o loop "$d/disk.img" "$d/data"
	mount -t tmpfs -o mode=0711,size=64m sandproof-engine2-exec "$d/exec"
	while read -r h; do
		mkdir -p "$h"
		mount -t tmpfs -o mode=1777,size=256m sandproof-engine2-hidden "$h"
	done < <(hidden)
	exec dockerd \
		--data-root "$d/data/docker" \
		--exec-root "$d/exec" \
		--pidfile "$d/exec/dockerd.pid" \
		--config-file "$d/daemon.json" \
		--host "tcp://127.0.0.1:$p" \
		--bridge=none --iptables=false --ip6tables=false \
		--cgroup-parent=sandproof-engine2
}

host() { printf 'tcp://127.0.0.1:%s\n' "$port"; }

answers() { DOCKER_HOST=$(host) docker info >/dev/null 2>&1; }

pidfile=$dir/engine2.pid
log=$dir/dockerd.log

start() {
	check_dir "$dir"
	check_port "$port"
	if pid=$(ours); then
		say "dockerd $pid (started by this script) is running"
	elif answers; then
		say "something else answers on $(host); choose another SANDPROOF_ENGINE2_PORT"
		return 1
	else
		mkdir -p "$dir"
		setsid "$BASH" "$self" run "$dir" "$port" </dev/null >>"$log" 2>&1 &
		pid=$!
		st=$(start_time "$pid") || { say "dockerd exited at once; see $log"; return 1; }
		printf '%s %s\n' "$pid" "$st" >"$pidfile"
		say "started dockerd pid $pid, data $dir, log $log"
	fi
	if ! wait_until "$wait_s" answers; then
		say "dockerd did not answer on $(host) within ${wait_s}s; see $log"
		tail -n 20 "$log" >&2 || true
		return 1
	fi
	say "running ($(DOCKER_HOST=$(host) docker info --format '{{.ServerVersion}}, storage {{.Driver}}'))"
	printf 'DOCKER_HOST=%s\n' "$(host)"
}

stop() {
	local pid
	if ! pid=$(ours); then
		rm -f "$pidfile"
		if answers; then
			say "an engine answers on $(host) that this script did not start; leaving it alone"
		else
			say "not running"
		fi
		return 0
	fi
	say "stopping dockerd pid $pid (it stops its containers)"
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
		if pid=$(ours); then
			say "running on $(host), started by this script (pid $pid)"
		else
			say "running on $(host), started elsewhere"
		fi
		return 0
	fi
	say "not running"
	return 3
}

load() {
	answers || { say "not running (engine2.sh start first)"; return 3; }
	local refs=("$@")
	if ((${#refs[@]} == 0)); then
		mapfile -t refs < <(env -u DOCKER_HOST docker images --format '{{.Repository}}:{{.Tag}}' 'sandproof/*')
	fi
	((${#refs[@]} > 0)) || { say "no images to load (build them with \`go run ./cmd/sandproof images build\`)"; return 3; }
	say "loading ${refs[*]}"
	env -u DOCKER_HOST docker save "${refs[@]}" | DOCKER_HOST=$(host) docker load
}

purge() {
	stop
	if pid=$(ours); then
		say "dockerd $pid still runs; not removing $dir"
		return 1
	fi
	check_dir "$dir"
	rm -rf -- "$dir"
	say "removed $dir"
}

case ${1:-} in
start) start ;;
stop) stop ;;
status) status ;;
env) printf 'export DOCKER_HOST=%s\n' "$(host)" ;;
load) shift; load "$@" ;;
purge) purge ;;
run)
	(($# == 3)) || { echo "usage: engine2.sh run DIR PORT" >&2; exit 2; }
	run "$2" "$3"
	;;
__inside) inside "$2" "$3" ;;
*)
	echo "usage: engine2.sh start|stop|status|env|load [REF...]|purge|run DIR PORT" >&2
	exit 2
	;;
esac
