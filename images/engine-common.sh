# engine-common.sh — what engine.sh and engine2.sh share: recognising the
# dockerd they started (pid and start time, so a reused pid is never
# signalled) and waiting on a condition with a deadline. Sourced, not run;
# the caller sets $pidfile ("PID START_TIME").

# start_time PID: field 22 of /proc/PID/stat, read after the last ')'.
start_time() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	s=${s##*) }
	set -- $s
	printf '%s\n' "${20}"
}

# ours: the recorded dockerd is alive and is still the process we started.
ours() {
	[[ -f $pidfile ]] || return 1
	local pid st now
	read -r pid st <"$pidfile" || return 1
	now=$(start_time "$pid") || return 1
	[[ $now == "$st" ]] || return 1
	printf '%s\n' "$pid"
}

# wait_until SECONDS CMD...: poll CMD until it succeeds or the time is up.
wait_until() {
	local deadline=$((SECONDS + $1))
	shift
	until "$@"; do
		((SECONDS < deadline)) || return 1
		sleep 0.2
	done
}

gone() { ! kill -0 "$1" 2>/dev/null; }
