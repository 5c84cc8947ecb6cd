#!/bin/sh
# hermes-setup.sh HERMES_HOME MODEL_URL MODEL API_KEY_ENV
#
# Writes Hermes Agent's config.yaml for one offline run against an
# OpenAI-compatible endpoint. POSIX sh (BusyBox too); run once at seed.
# The config names the key's variable (${API_KEY_ENV}, which Hermes expands
# when it loads the file), never the key.
#
#   model.provider custom + base_url + api_key: the endpoint and its key
#   model.context_length: skips the context-length probe that otherwise
#     fetches https://openrouter.ai/api/v1/models at startup
#   agent.environment_probe false: no `python3 -c ...`/`pip --version` run
#     against the image's Python to describe it in the system prompt
#   security.allow_lazy_installs false: no `python -m pip install` at tool
#     registration (edge-tts for the tts toolset); HERMES_DISABLE_LAZY_INSTALLS=1
#     in the launch env says the same
set -eu
[ "$#" -eq 4 ] || { echo "usage: $0 HERMES_HOME MODEL_URL MODEL API_KEY_ENV" >&2; exit 2; }
home=$1 url=$2 model=$3 keyenv=$4
case $keyenv in
  ''|*[!A-Za-z0-9_]*|[0-9]*) echo "$0: bad variable name: $keyenv" >&2; exit 2 ;;
esac
# The URL and model go inside YAML double quotes: refuse what would need escaping.
for v in "$url" "$model"; do
  case $v in
    *'"'*|*'\'*|*'
'*) echo "$0: a quote, backslash or newline in $v" >&2; exit 2 ;;
  esac
done
umask 077
mkdir -p "$home"
tmp=$home/config.yaml.tmp
cat > "$tmp" <<EOF
model:
  provider: custom
  base_url: "$url"
  default: "$model"
  api_key: "\${$keyenv}"
  context_length: 128000
agent:
  environment_probe: false
security:
  allow_lazy_installs: false
EOF
mv "$tmp" "$home/config.yaml"
