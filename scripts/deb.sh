#!/usr/bin/env bash
# Builds the Debian package of a built tree: dist/agent_VERSION_ARCH.deb,
# with dpkg-deb (no network). Layout:
#   /usr/bin/agent, /usr/bin/agentctl
#   /usr/lib/agent/libonnxruntime.so.1
#   /usr/share/agent/models/silero_vad_v5.onnx (the real VAD model)
#   /usr/share/agent/skills, /usr/share/agent/workspace (defaults)
#   /lib/systemd/system/agent.service, agent@.service
#   /etc/agent/config.toml (a conffile: an upgrade never overwrites a changed one)
# The maintainer scripts (packaging/debian/) create the system user, the
# state and the secrets file, start the service and show `agentctl doctor`.
#
#   scripts/deb.sh ARCH BINDIR [VERSION]    ARCH amd64|arm64; BINDIR holds agent, agentctl, lib/
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

debversion() {
  # A Debian version from git: the tag (v1.2.3 -> 1.2.3), else
  # 0.0~gitDATE.SHA (sorts before any release).
  local tag
  if tag=$(git -C "$root" describe --tags --exact-match 2>/dev/null); then
    echo "${tag#v}"
  else
    echo "0.0~git$(git -C "$root" log -1 --format=%cd --date=format:%Y%m%d%H%M 2>/dev/null || date +%Y%m%d%H%M).$(git -C "$root" rev-parse --short=8 HEAD 2>/dev/null || echo local)"
  fi
}
if [ "${1:-}" = --version ]; then debversion; exit 0; fi
arch=${1:?ARCH (amd64 or arm64)}
src=${2:?BINDIR}
version=${3:-$(debversion)}
case $arch in amd64|arm64) ;; *) echo "deb: ARCH is amd64 or arm64, not $arch" >&2; exit 2 ;; esac
for f in agent agentctl lib/libonnxruntime.so.1; do
  [ -f "$src/$f" ] || { echo "deb: $src/$f missing (make build, or make build-arm64)" >&2; exit 1; }
done
vad=$root/models/silero_vad_v5.onnx
[ -f "$vad" ] || vad=$root/.deps/models/silero_vad_v5.onnx
[ -f "$vad" ] || { echo "deb: the Silero VAD model is missing (scripts/deps.sh vad)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pkg=$work/agent
umask 022
install -d "$pkg/DEBIAN" "$pkg/usr/bin" "$pkg/usr/lib/agent" "$pkg/usr/share/agent/models" "$pkg/usr/share/doc/agent" \
  "$pkg/lib/systemd/system" "$pkg/etc/agent" "$pkg/usr/share/lintian/overrides"
install -m 0755 "$src/agent" "$src/agentctl" "$pkg/usr/bin/"
install -m 0644 "$src/lib/libonnxruntime.so.1" "$pkg/usr/lib/agent/"
install -m 0644 "$vad" "$pkg/usr/share/agent/models/silero_vad_v5.onnx"
cp -r "$root/workspace" "$pkg/usr/share/agent/workspace"
mv "$pkg/usr/share/agent/workspace/skills" "$pkg/usr/share/agent/skills"
install -m 0755 "$root/scripts/voice-token.sh" "$pkg/usr/share/agent/voice-token.sh"
find "$pkg/usr/share/agent" -type d -exec chmod 0755 {} + -o -type f -name '*.sh' -exec chmod 0755 {} + -o -type f -exec chmod 0644 {} +

# The units, with the package's paths.
for unit in agent.service agent@.service; do
  sed -e 's|/usr/local/bin|/usr/bin|g' -e 's|/usr/local/lib/agent|/usr/lib/agent|g' -e 's|/usr/local/share|/usr/share|g' \
    "$root/systemd/$unit" > "$pkg/lib/systemd/system/$unit"
  chmod 0644 "$pkg/lib/systemd/system/$unit"
done
# The configuration: install.sh's rendering with the package's prefix.
PREFIX=/usr "$root/scripts/install.sh" --print-config > "$pkg/etc/agent/config.toml"
chmod 0644 "$pkg/etc/agent/config.toml"

# Documentation (Debian policy: copyright and a compressed changelog).
install -m 0644 "$root/README.md" "$pkg/usr/share/doc/agent/README.md"
install -m 0644 "$root/packaging/debian/copyright" "$pkg/usr/share/doc/agent/copyright"
{
  echo "agent ($version) unstable; urgency=medium"
  echo
  echo "  * Built from $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo a local tree)."
  echo
  echo " -- agent developers <agent@example.com>  $(date -R -d "@$(git -C "$root" log -1 --format=%ct 2>/dev/null || date +%s)")"
} | gzip -9n > "$pkg/usr/share/doc/agent/changelog.gz"
chmod 0644 "$pkg/usr/share/doc/agent/changelog.gz"
install -m 0644 "$root/packaging/debian/lintian-overrides" "$pkg/usr/share/lintian/overrides/agent"
install -d "$pkg/usr/share/man/man1"
for m in agent agentctl; do
  gzip -9n < "$root/packaging/debian/$m.1" > "$pkg/usr/share/man/man1/$m.1.gz"
  chmod 0644 "$pkg/usr/share/man/man1/$m.1.gz"
done

for s in postinst prerm postrm; do
  install -m 0755 "$root/packaging/debian/$s" "$pkg/DEBIAN/$s"
done
echo /etc/agent/config.toml > "$pkg/DEBIAN/conffiles"
size=$(du -sk --exclude=DEBIAN "$pkg" | cut -f1)
sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" -e "s|@SIZE@|$size|" "$root/packaging/debian/control" > "$pkg/DEBIAN/control"

mkdir -p "$root/dist"
out=$root/dist/agent_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$pkg" "$out" >/dev/null
echo "$out"
