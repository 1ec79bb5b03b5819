#!/usr/bin/env bash
# Installs the native dependencies the build and tests need. Idempotent: every
# step is skipped when its result is already present. Reaches only Debian's
# package archive, the npm registry and the Go module proxy.
#
#   scripts/deps.sh            everything (apt, ONNX Runtime, Silero VAD, whisper.cpp host+arm64, Go modules)
#   scripts/deps.sh apt|ort|vad|whisper|whisper-arm64|whisper-cuda|toolchain|go|node|mcp|nats   one step
#   scripts/deps.sh --which-go   print the Go binary to use (1.26 or newer)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
deps="$root/.deps"
ORT_VERSION=1.24.1
WHISPER_NPM=nodejs-whisper@0.3.1
WHISPER_VERSION=1.9.1
# The Silero VAD v5 model (MIT licence, github.com/snakers4/silero-vad) as
# vad-web ships it in its npm package; pinned by SHA-256.
VAD_NPM=@ricky0123/vad-web@0.0.31
VAD_SHA256=2623a2953f6ff3d2c1e61740c6cdb7168133479b267dfef114a4a3cc5bdd788f
jobs=$(nproc 2>/dev/null || echo 2)

GO_MIN_MINOR=26
GO_TOOLCHAIN=go1.26.8

log() { printf 'deps: %s\n' "$*" >&2; }

go_ok() { # go_ok BINARY: true when it is Go 1.$GO_MIN_MINOR or newer
  local v
  v=$("$1" env GOVERSION 2>/dev/null) || return 1
  v=${v#go1.}
  [ "${v%%.*}" -ge "$GO_MIN_MINOR" ] 2>/dev/null
}

which_go() { # prints the Go binary to use
  local c
  for c in "$(command -v go 2>/dev/null)" /usr/local/go/bin/go "$deps/go/bin/go"; do
    [ -n "$c" ] && [ -x "$c" ] && go_ok "$c" && { echo "$c"; return 0; }
  done
  return 1
}

step_toolchain() {
  # A fresh Debian 12 has no Go 1.26. Debian's golang-go (1.19) is enough to
  # fetch the official toolchain from the Go module proxy, the same archive
  # `GOTOOLCHAIN` switching uses.
  if which_go >/dev/null; then log "go: $("$(which_go)" env GOVERSION) present"; return; fi
  [ -x /usr/lib/go/bin/go ] || [ -x /usr/bin/go ] || apt_install golang-go ca-certificates
  local boot arch tmp dir
  boot=$(command -v go || echo /usr/lib/go/bin/go)
  arch=$(dpkg --print-architecture)
  tmp=$(mktemp -d)
  log "go: fetching $GO_TOOLCHAIN toolchain through the module proxy"
  dir=$(cd "$tmp" && GOPATH="$deps/gopath-boot" GOFLAGS=-modcacherw "$boot" mod download -json \
    "golang.org/toolchain@v0.0.1-$GO_TOOLCHAIN.linux-$arch" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  [ -x "$dir/bin/go" ] || { echo "deps: toolchain download failed" >&2; exit 1; }
  rm -rf "$deps/go" "$deps/go.tmp"
  cp -a "$dir" "$deps/go.tmp"
  # Module zips carry no mode bits; the go command's own switcher does this too.
  chmod -R u+w "$deps/go.tmp"
  find "$deps/go.tmp/bin" "$deps/go.tmp/pkg/tool" -type f -exec chmod +x {} +
  mv "$deps/go.tmp" "$deps/go"
  rm -rf "$tmp" "$deps/gopath-boot"
  log "go: $("$deps/go/bin/go" env GOVERSION) installed in .deps/go (add it to PATH or use make)"
}

case $(uname -m) in
  x86_64) host_arch=amd64 ;;
  aarch64) host_arch=arm64 ;;
  *) echo "deps: unsupported machine $(uname -m) (amd64 and arm64 are)" >&2; exit 1 ;;
esac

# Tests need ffmpeg, espeak-ng, sox, chromium, systemd (systemd-analyze),
# tzdata and node (pkg/nativetest: under AGENT_REQUIRE_NATIVE=1 a missing one
# fails the test run).
apt_packages=(cmake build-essential pkg-config libsqlite3-dev sqlite3 ffmpeg espeak-ng sox chromium
  systemd tzdata strace bubblewrap poppler-utils python3 nodejs npm curl ca-certificates)
# Cross-building for the Jetson from an x86 machine, and running the result.
[ "$host_arch" = amd64 ] && apt_packages+=(gcc-aarch64-linux-gnu g++-aarch64-linux-gnu
  libc6-dev-arm64-cross qemu-user-static)

apt_install() {
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  log "apt: installing $*"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

step_apt() {
  local missing=()
  for p in "${apt_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then log "apt: all present"; return; fi
  # Node.js may come from elsewhere (a distribution image); don't fight it.
  if command -v node >/dev/null && command -v npm >/dev/null; then
    local keep=()
    for p in "${missing[@]}"; do case $p in nodejs|npm) ;; *) keep+=("$p") ;; esac; done
    missing=("${keep[@]}")
    [ ${#missing[@]} -eq 0 ] && { log "apt: all present"; return; }
  fi
  apt_install "${missing[@]}"
}

npm_fetch() { # npm_fetch SPEC DEST: unpack an npm package tarball without running its scripts
  local spec=$1 dest=$2
  [ -f "$dest/.complete" ] && return
  local tmp
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "$spec" >/dev/null)
  mkdir -p "$tmp/x"
  tar -xzf "$tmp"/*.tgz -C "$tmp/x"
  touch "$tmp/x/.complete"
  # Replace as a whole, so an interrupted run never leaves half a package.
  rm -rf "$dest"
  mkdir -p "$(dirname "$dest")"
  mv "$tmp/x" "$dest"
  rm -rf "$tmp"
}

step_ort() {
  local out="$deps/onnxruntime"
  if [ -f "$out/linux-amd64/libonnxruntime.so.1" ] && [ -f "$out/linux-arm64/libonnxruntime.so.1" ]; then
    log "onnxruntime $ORT_VERSION: present"; return
  fi
  log "onnxruntime $ORT_VERSION: fetching onnxruntime-node@$ORT_VERSION"
  npm_fetch "onnxruntime-node@$ORT_VERSION" "$deps/npm/onnxruntime-node"
  for a in x64:amd64 arm64:arm64; do
    mkdir -p "$out/linux-${a#*:}"
    cp "$deps/npm/onnxruntime-node/package/bin/napi-v6/linux/${a%%:*}/libonnxruntime.so.1"* "$out/linux-${a#*:}/"
  done
  (cd "$out/linux-amd64" && ln -sf libonnxruntime.so.1 libonnxruntime.so)
  (cd "$out/linux-arm64" && ln -sf libonnxruntime.so.1 libonnxruntime.so)
}

step_vad() { # .deps/models/silero_vad_v5.onnx: pkg/vad's model (its tests and the build machine)
  local out="$deps/models/silero_vad_v5.onnx"
  if [ -f "$out" ] && [ "$(sha256sum "$out" | cut -d' ' -f1)" = "$VAD_SHA256" ]; then
    log "silero vad: present"; return
  fi
  log "silero vad: fetching $VAD_NPM"
  local tmp got
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "$VAD_NPM" >/dev/null)
  tar -xzf "$tmp"/*.tgz -C "$tmp" package/dist/silero_vad_v5.onnx
  got=$(sha256sum "$tmp/package/dist/silero_vad_v5.onnx" | cut -d' ' -f1)
  if [ "$got" != "$VAD_SHA256" ]; then
    rm -rf "$tmp"
    echo "deps: silero_vad_v5.onnx from $VAD_NPM: SHA-256 mismatch (got $got, want $VAD_SHA256)" >&2
    exit 1
  fi
  mkdir -p "$deps/models"
  mv "$tmp/package/dist/silero_vad_v5.onnx" "$out.tmp"
  mv "$out.tmp" "$out"
  rm -rf "$tmp"
}

whisper_src() {
  npm_fetch "$WHISPER_NPM" "$deps/npm/nodejs-whisper"
  local src="$deps/npm/nodejs-whisper/package/cpp/whisper.cpp"
  [ -f "$src/include/whisper.h" ] || { echo "deps: whisper.cpp sources not found in $WHISPER_NPM" >&2; exit 1; }
  echo "$src"
}

whisper_build() { # whisper_build ARCH cli|nocli [cmake args...]
  # cli: also build whisper.cpp's own whisper-cli into $out/bin (host only; the
  # benchmarks compare our Go path against it on the same tree).
  local arch=$1 cli=$2; shift 2
  local out="$deps/whisper/linux-$arch"
  local stamp="$WHISPER_VERSION $*"
  local targets=(whisper) examples=OFF
  if [ "$cli" = cli ]; then stamp="$stamp +cli"; targets+=(whisper-cli); examples=ON; fi
  if [ -f "$out/lib/libwhisper.a" ] && [ -f "$out/include/whisper.h" ] && [ "$(cat "$out/BUILD" 2>/dev/null)" = "$stamp" ] &&
    { [ "$cli" != cli ] || [ -x "$out/bin/whisper-cli" ]; }; then
    log "whisper.cpp $WHISPER_VERSION ($arch): present"; return
  fi
  local src
  src=$(whisper_src)
  log "whisper.cpp $WHISPER_VERSION ($arch): building (a few minutes on 2 cores)"
  local b="$deps/build/whisper-$arch"
  rm -rf "$b"
  mkdir -p "$deps/build"
  cmake -S "$src" -B "$b" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF \
    -DGGML_OPENMP=OFF -DWHISPER_BUILD_TESTS=OFF -DWHISPER_BUILD_EXAMPLES=$examples -DWHISPER_BUILD_SERVER=OFF \
    -DWHISPER_SDL2=OFF -DWHISPER_CURL=OFF "$@" >"$b.log" 2>&1 || { tail -30 "$b.log" >&2; exit 1; }
  cmake --build "$b" -j "$jobs" --target "${targets[@]}" >>"$b.log" 2>&1 || { tail -30 "$b.log" >&2; exit 1; }
  rm -rf "$out"
  mkdir -p "$out/lib" "$out/include"
  # The libraries only: the examples' own helper archive stays behind.
  find "$b" -name '*.a' -not -path '*/examples/*' -exec cp {} "$out/lib/" \;
  if [ "$cli" = cli ]; then
    mkdir -p "$out/bin"
    cp "$b/bin/whisper-cli" "$out/bin/"
  fi
  cp "$src"/include/whisper.h "$src"/ggml/include/*.h "$out/include/"
  echo "$stamp" > "$out/BUILD"
  rm -rf "$b"
}

# Jetson Orin (Cortex-A78AE): fp16 arithmetic and dot-product instructions.
arm_arch=-DGGML_CPU_ARM_ARCH=armv8.2-a+fp16+dotprod

step_whisper() {
  if [ "$host_arch" = arm64 ]; then whisper_build arm64 cli "$arm_arch"; else whisper_build amd64 cli; fi
}

step_whisper_arm64() {
  if [ "$host_arch" = arm64 ]; then step_whisper; return; fi
  whisper_build arm64 nocli -DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64 \
    -DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc -DCMAKE_CXX_COMPILER=aarch64-linux-gnu-g++ "$arm_arch"
}

# whisper-cuda: whisper.cpp with ggml's CUDA backend, for `make build-cuda`
# on the Jetson itself (JetPack 6 puts the CUDA toolkit in /usr/local/cuda).
# CUDA_ARCH picks the GPU: 87 is the Orin's Ampere (sm_87). Not part of
# `scripts/deps.sh` without arguments: it needs nvcc, which this project's
# CI machines do not have.
step_whisper_cuda() {
  local nvcc
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  [ -x "$nvcc" ] || { echo "deps: whisper-cuda needs the CUDA toolkit (nvcc); on a Jetson it comes with JetPack (sudo apt install nvidia-jetpack)" >&2; exit 1; }
  local extra=()
  [ "$host_arch" = arm64 ] && extra+=("$arm_arch")
  whisper_build "$host_arch-cuda" nocli -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-87}" \
    -DCMAKE_CUDA_COMPILER="$nvcc" "${extra[@]}"
}

step_go() {
  step_toolchain
  log "go: downloading modules"
  (cd "$root" && "$(which_go)" mod download)
}

step_node() { # test-only reference tools (independent tokenizer and ONNX Runtime for numerics)
  local d="$root/scripts/ref"
  if [ -d "$d/node_modules/onnxruntime-node" ] && [ -d "$d/node_modules/@huggingface/tokenizers" ] && [ -d "$d/node_modules/onnx-proto" ]; then
    log "node reference tools: present"; return
  fi
  log "node reference tools: installing"
  (cd "$d" && npm ci --ignore-scripts --no-audit --no-fund --silent)
}

step_mcp() { # test-only: the reference MCP servers pkg/mcp's integration tests run against
  "$root/scripts/mcp-servers.sh" >&2
}

step_nats() { # test-only: Debian's nats-server, the fleet's tests also run against it
  local d="$root/.deps/nats-server"
  if [ -x "$d/usr/sbin/nats-server" ]; then log "nats-server: present"; return; fi
  # Unpacked, not installed: the package would start a NATS service on
  # the machine.
  log "nats-server: unpacking Debian's package into $d"
  local tmp; tmp=$(mktemp -d)
  (cd "$tmp" && apt-get download -qq nats-server >/dev/null 2>&1) || {
    [ "$(id -u)" -eq 0 ] && apt-get update -qq; (cd "$tmp" && apt-get download -qq nats-server >/dev/null); }
  mkdir -p "$d"
  dpkg-deb -x "$tmp"/nats-server_*.deb "$d"
  rm -rf "$tmp"
}

if [ "${1:-}" = --which-go ]; then which_go; exit; fi
if [ $# -eq 0 ]; then set -- apt ort vad whisper whisper-arm64 go node mcp nats; fi
for s in "$@"; do
  case $s in
    apt) step_apt ;;
    ort) step_ort ;;
    vad) step_vad ;;
    whisper) step_whisper ;;
    whisper-arm64) step_whisper_arm64 ;;
    whisper-cuda) step_whisper_cuda ;;
    go) step_go ;;
    toolchain) step_toolchain ;;
    node) step_node ;;
    mcp) step_mcp ;;
    nats) step_nats ;;
    *) echo "deps: unknown step $s" >&2; exit 2 ;;
  esac
done
