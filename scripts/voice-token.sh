#!/bin/sh
# Gives the agent's environment file a voice token: when ENV_FILE (default
# /etc/agent/agent.env) has no VOICE_TOKEN= line, one is appended, 24 random
# bytes in hex. An existing line is never changed, even an empty one (that
# is reported: with an empty voice.token no device can connect). Used by
# install.sh; a package's postinst can run it the same way.
#
#   scripts/voice-token.sh [ENV_FILE]
set -eu
env_file=${1:-/etc/agent/agent.env}
if [ ! -f "$env_file" ]; then
  echo "voice-token: $env_file does not exist" >&2
  exit 1
fi
if grep -Eq '^[[:space:]]*(export[[:space:]]+)?VOICE_TOKEN=' "$env_file"; then
  if grep -Eq "^[[:space:]]*(export[[:space:]]+)?VOICE_TOKEN=[\"']?[\"']?[[:space:]]*\$" "$env_file"; then
    echo "voice-token: VOICE_TOKEN in $env_file is empty; left as it is (no device can connect until it is set)" >&2
  fi
  exit 0
fi
token=$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')
if [ ${#token} -ne 48 ]; then
  echo "voice-token: could not read 24 bytes from /dev/urandom" >&2
  exit 1
fi
# A last line without its newline must not swallow ours.
if [ -s "$env_file" ] && [ "$(tail -c1 "$env_file" | od -An -c | tr -d ' ')" != '\n' ]; then
  printf '\n' >>"$env_file"
fi
printf '# Token of voice and hardware devices (voice.token), generated at install.\nVOICE_TOKEN=%s\n' "$token" >>"$env_file"
echo "voice-token: wrote a new VOICE_TOKEN to $env_file (devices say hello with it: grep VOICE_TOKEN $env_file)"
