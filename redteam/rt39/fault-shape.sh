#!/bin/sh
# Red team rt39: a hostile harness for scenario.model_fault (model-429,
# model-400), speaking Chat Completions over bash's /dev/tcp.
#
# RT_MODE=429: the task's first request is answered 429 (Retry-After 1 s).
#   RT_SHAPE=hidden: the task is sent again AT ONCE with a made-up
#   assistant turn before the prompt (the relay's digest then does not
#   begin with the 429's conversation, the model still reads the task and
#   answers with its read); the read is run; its result is sent in the
#   429's conversation only after RT_WAIT seconds.
#   RT_SHAPE=plain: the same, the task sent again at once as it was (the
#   positive control: must fail as a retry before its Retry-After).
# RT_MODE=400: the request carrying the challenge is answered 400
#   (context limit); the harness sends it again WHOLE, with one user turn
#   put before it ("Summary: ..."), longer than the refused one.
#
# Usage: fault-shape.sh MODEL_URL MODEL PROMPT, the key in $FAKE_API_KEY.
set -eu
url=$1 model=$2 prompt=$3
log() { printf 'rt39: %s\n' "$*" >&2; }
esc() { printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g' | tr '\n' ' '; }
p=$(esc "$prompt") m=$(esc "$model")
read_schema='{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}'
write_schema='{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}'
tools='"tools":[{"type":"function","function":{"name":"read","parameters":'$read_schema'}},{"type":"function","function":{"name":"write","parameters":'$write_schema'}}]'
hp=${url#http://}
host=${hp%%/*} base=/${hp#*/}
# ask MESSAGES: one request, the whole answer (status line, headers, body)
# on stdout. HTTP/1.0: the server closes after its answer.
ask() {
	body='{"model":"'$m'","stream":false,"messages":['$1'],'$tools'}'
	printf 'POST %s/chat/completions HTTP/1.0\r\nHost: %s\r\nContent-Type: application/json\r\nAuthorization: Bearer %s\r\nContent-Length: %s\r\n\r\n%s' \
		"$base" "$host" "$FAKE_API_KEY" "${#body}" "$body" |
		bash -c 'exec 3<>"/dev/tcp/${0%:*}/${0##*:}"; cat >&3; cat <&3' "$host"
}
status() { printf '%s' "$1" | head -n 1 | cut -d' ' -f2; }
callid() { printf '%s' "$1" | grep -o '"id":"call_[^"]*"' | head -n 1 | cut -d'"' -f4; }
# args: the call's arguments as the JSON string literal the model sent.
args() { printf '%s' "$1" | grep -o '"arguments":"\([^"\\]\|\\.\)*"' | head -n 1 | sed 's/^"arguments"://'; }
user='{"role":"user","content":"'$p'"}'
task=${RT_TASK:-/task}
challenge=$(esc "$(cat $task/challenge.txt)")

case ${RT_MODE:-429} in
429)
	a1=$(ask "$user")
	log "request 1: $(status "$a1")"
	if [ "${RT_SHAPE:-hidden}" = hidden ]; then
		a2=$(ask '{"role":"assistant","content":"Understood."},'"$user")
	else
		a2=$(ask "$user")
	fi
	log "request 2 (at once, $RT_SHAPE): $(status "$a2")"
	id=$(callid "$a2") ra=$(args "$a2")
	[ -n "$id" ] || { log "no read call in: $a2"; exit 1; }
	sleep "${RT_WAIT:-1.2}"
	conv=$user',{"role":"assistant","content":null,"tool_calls":[{"id":"'$id'","type":"function","function":{"name":"read","arguments":'$ra'}}]},{"role":"tool","tool_call_id":"'$id'","content":"'$challenge'"}'
	a3=$(ask "$conv")
	log "request 3: $(status "$a3")"
	pre=""
	;;
400)
	a1=$(ask "$user")
	id=$(callid "$a1") ra=$(args "$a1")
	[ -n "$id" ] || { log "no read call in: $a1"; exit 1; }
	conv=$user',{"role":"assistant","content":null,"tool_calls":[{"id":"'$id'","type":"function","function":{"name":"read","arguments":'$ra'}}]},{"role":"tool","tool_call_id":"'$id'","content":"'$challenge'"}'
	a2=$(ask "$conv")
	log "request 2: $(status "$a2")"
	# The refused request again, whole, one turn longer.
	pre='{"role":"user","content":"Summary of the conversation so far: nothing to summarise."},'
	conv=$pre$conv
	a3=$(ask "$conv")
	log "request 3 (the 400's sent again with a turn before it): $(status "$a3")"
	;;
esac
wid=$(callid "$a3") wa=$(args "$a3")
token=$(printf '%s' "$a3" | grep -o 'proof-[0-9a-f]\{32\}' | head -n 1) || true
[ -n "$token" ] && [ -n "$wid" ] || { log "no write in: $a3"; exit 1; }
printf '%s' "$token" > $task/deliverable.txt
conv=$conv',{"role":"assistant","content":null,"tool_calls":[{"id":"'$wid'","type":"function","function":{"name":"write","arguments":'$wa'}}]},{"role":"tool","tool_call_id":"'$wid'","content":"wrote /task/deliverable.txt"}'
a4=$(ask "$conv")
log "request 4: $(status "$a4")"
printf '{"type":"agent_end"}\n'
