#!/bin/sh
# codex-setup.sh CODEX_HOME MODEL_URL MODEL KEYVAR
# Writes Codex's config.toml into its private CODEX_HOME: a custom model
# provider at MODEL_URL speaking the Responses API, the key read from the
# variable named KEYVAR (never the key itself), no retries (fail fast), no
# update check, analytics or feedback, and Codex's own sandbox off
# (danger-full-access): its bubblewrap sandbox needs user namespaces the
# container does not give, and warden and the container are the sandbox
# (docs/harnesses.md, "Codex"). POSIX sh: runs on BusyBox too.
set -eu
if [ "$#" -ne 4 ]; then
	echo "usage: codex-setup.sh CODEX_HOME MODEL_URL MODEL KEYVAR" >&2
	exit 2
fi
# toml quotes a value as a TOML basic string.
toml() { printf '"%s"' "$(printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g')"; }
umask 077
mkdir -p "$1"
cat > "$1/config.toml.tmp" <<CONFIG
model = $(toml "$3")
model_provider = "sandproof"
sandbox_mode = "danger-full-access"
approval_policy = "never"
check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

[model_providers.sandproof]
name = "sandproof"
base_url = $(toml "$2")
env_key = $(toml "$4")
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
CONFIG
mv "$1/config.toml.tmp" "$1/config.toml"
