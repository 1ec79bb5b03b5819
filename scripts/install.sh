#!/usr/bin/env bash
# Installs agent on this machine (a Jetson, or any systemd Linux):
# binaries, the ONNX Runtime library, the systemd units, a default
# configuration and the workspace defaults. Idempotent; never overwrites an
# existing /etc/agent/config.toml.
#
#   scripts/install.sh [BINDIR]     BINDIR holds agent, agentctl, lib/ (default: bin)
#
# On a Jetson, copy bin/linux-arm64/ from `make build-arm64` (or build on the
# device) and run this script as root there.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=${1:-$root/bin}
prefix=${PREFIX:-/usr/local}
etc=${ETC_DIR:-/etc/agent}

# The appliance's config: absolute paths that the unit's sandbox allows
# (/etc is read-only under ProtectSystem=strict; state in /var/lib/agent).
render_config() {
  sed -e 's|^workspace = .*|workspace = "/var/lib/agent/workspace"|' \
      -e 's|^state_dir = .*|state_dir = "/var/lib/agent"|' \
      -e 's|^#* *admin_socket = .*|admin_socket = "/run/agent/agent.sock"|' \
      -e "s|^model_dir = .*|model_dir = \"$prefix/share/agent/models/bge-small-en-v1.5\"|" \
      -e "s|^onnxruntime_lib = .*|onnxruntime_lib = \"$prefix/lib/agent/libonnxruntime.so.1\"|" \
      -e "s|^model = \"models/ggml|model = \"$prefix/share/agent/models/ggml|" \
      -e "s|^vad_model = .*|vad_model = \"$prefix/share/agent/models/silero_vad_v5.onnx\"|" \
      "$root/config.toml"
}
if [ "${1:-}" = --print-config ]; then render_config; exit 0; fi

[ "$(id -u)" -eq 0 ] || { echo "install: run as root" >&2; exit 1; }
for f in agent agentctl lib/libonnxruntime.so.1; do
  [ -f "$src/$f" ] || { echo "install: $src/$f missing (make build, or make build-arm64 for a Jetson)" >&2; exit 1; }
done

id agent >/dev/null 2>&1 || useradd --system --home-dir /var/lib/agent --shell /usr/sbin/nologin agent
# Audio devices and the GPU on a Jetson.
for g in audio video render; do getent group "$g" >/dev/null && usermod -aG "$g" agent; done

install -d -m 0755 "$prefix/bin" "$prefix/lib/agent" "$prefix/share/agent/models" "$prefix/share/doc/agent"
install -m 0755 "$src/agent" "$src/agentctl" "$prefix/bin/"
install -m 0644 "$src/lib/libonnxruntime.so.1" "$prefix/lib/agent/"
install -m 0644 "$root/README.md" "$root/models/README.md" "$prefix/share/doc/agent/" 2>/dev/null || true
for unit in agent.service agent@.service; do
  sed -e "s|/usr/local|$prefix|g" -e "s|/etc/agent|$etc|g" "$root/systemd/$unit" > "/etc/systemd/system/$unit"
  chmod 0644 "/etc/systemd/system/$unit"
done

install -d -m 0750 -g agent "$etc"
if [ ! -f "$etc/config.toml" ]; then
  render_config > "$etc/config.toml"
  chmod 0640 "$etc/config.toml"; chgrp agent "$etc/config.toml"
  echo "install: wrote $etc/config.toml (edit it, then put secrets in $etc/agent.env)"
fi
if [ ! -f "$etc/agent.env" ]; then
  printf '# Secrets for config.toml ${VAR} references, e.g.\n# OPENAI_API_KEY=sk-...\n' > "$etc/agent.env"
  chmod 0640 "$etc/agent.env"; chgrp agent "$etc/agent.env"
fi
# Devices need a voice token (an empty one admits no device): generated once,
# never overwritten.
"$root/scripts/voice-token.sh" "$etc/agent.env"
install -d -m 0750 -o agent -g agent /var/lib/agent /var/lib/agent/workspace
cp -rn "$root/workspace/." /var/lib/agent/workspace/
chown -R agent:agent /var/lib/agent/workspace

if [ -d "$root/models" ]; then
  for m in "$root"/models/*; do
    [ "$(basename "$m")" = README.md ] && continue
    [ -e "$m" ] && cp -rn "$m" "$prefix/share/agent/models/"
  done
fi

# What the sandboxed tools run (exec, read_document's PDFs, the video
# tools): without them those tools are not offered or fail, and doctor says so.
missing=()
for p in bwrap:bubblewrap pdftotext:poppler-utils ffmpeg:ffmpeg espeak-ng:espeak-ng python3:python3; do
  command -v "${p%%:*}" >/dev/null || missing+=("${p#*:}")
done
[ ${#missing[@]} -eq 0 ] || echo "install: for exec, documents and video also run: apt install ${missing[*]}" >&2

if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
  systemctl daemon-reload
  echo "install: done. Next: agentctl -config $etc/config.toml doctor; systemctl enable --now agent"
else
  echo "install: done (no systemd running here; units copied to /etc/systemd/system)"
fi
