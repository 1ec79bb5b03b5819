#!/usr/bin/env bash
# Cross-builds bin/linux-arm64/{agent,agentctl,lib/libonnxruntime.so.1} with
# cgo (sqlite, sqlite-vec, whisper.cpp) and proves the result starts by
# running `agent --version` under qemu-aarch64.
#   scripts/cross-arm64.sh [LDFLAGS] [TAGS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
ldflags=${1:--s -w}
tags=${2:-sqlite_fts5,whisper}
deps="$root/.deps"
go=$(scripts/deps.sh --which-go)
out="$root/bin/linux-arm64"

# sqlite-vec's C file includes <sqlite3.h>; the header is architecture
# independent, so the host's copy serves the cross build without pulling in
# the rest of /usr/include.
mkdir -p "$deps/sqlite-include"
cp -f /usr/include/sqlite3.h /usr/include/sqlite3ext.h "$deps/sqlite-include/"

native=false
[ "$(uname -m)" = aarch64 ] && native=true
cc=aarch64-linux-gnu-gcc cxx=aarch64-linux-gnu-g++
$native && cc=gcc cxx=g++

# sqlite-vec's NEON kernels (L2 and L1 distances) are safe on every
# aarch64 CPU; NEON is part of the base architecture.
# (-flax-vector-conversions: that code relies on clang's implicit vector
# casts, which GCC rejects without it.)
export CGO_ENABLED=1 GOOS=linux GOARCH=arm64 CC=$cc CXX=$cxx
export CGO_CFLAGS="-O2 -I$deps/whisper/linux-arm64/include -I$deps/sqlite-include -DSQLITE_VEC_ENABLE_NEON -flax-vector-conversions"
export CGO_LDFLAGS="-L$deps/whisper/linux-arm64/lib"
mkdir -p "$out/lib"
"$go" build -trimpath -tags "$tags" -ldflags "$ldflags" -o "$out/" ./cmd/agent ./cmd/agentctl
# The store's tests, for arm64: they check sqlite-vec's NEON kernels.
"$go" test -c -tags "$tags" -o "$out/store.test" ./pkg/store
cp -f "$deps/onnxruntime/linux-arm64/libonnxruntime.so.1" "$out/lib/"
file "$out/agent" 2>/dev/null || true

# JetPack 6 is Ubuntu 22.04: glibc 2.35. Refuse a binary that needs newer.
max_glibc=2.35
objdump=aarch64-linux-gnu-objdump
$native && objdump=objdump
if command -v "$objdump" >/dev/null; then
  need=$("$objdump" -T "$out/agent" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)
  echo "cross-arm64: agent needs glibc >= $need (JetPack 6 has $max_glibc)"
  if [ "$(printf '%s\n%s\n' "$need" "$max_glibc" | sort -V | tail -1)" != "$max_glibc" ]; then
    echo "cross-arm64: binary needs glibc $need, newer than JetPack 6's $max_glibc" >&2
    exit 1
  fi
fi

if $native; then
  "$out/agent" --version
  "$out/agentctl" --version
  (cd pkg/store && "$out/store.test" -test.count=1)
  rm -f "$out/store.test"
  exit 0
fi
qemu=$(command -v qemu-aarch64-static || command -v qemu-aarch64 || true)
if [ -z "$qemu" ]; then
  echo "cross-arm64: qemu-aarch64 not found (scripts/deps.sh apt); built but not run" >&2
  exit 1
fi
echo "cross-arm64: running under $(basename "$qemu"):"
"$qemu" -L /usr/aarch64-linux-gnu "$out/agent" --version
"$qemu" -L /usr/aarch64-linux-gnu "$out/agentctl" --version
(cd pkg/store && "$qemu" -L /usr/aarch64-linux-gnu "$out/store.test" -test.count=1)
rm -f "$out/store.test"

# With the test models present (make testmodels), prove the whole native
# stack on arm64: SQLite + sqlite-vec + FTS5, ONNX Runtime loading and
# running the bge-small-shaped model and the Silero VAD, whisper.cpp
# loading the tiny model.
models="$root/testdata/models"
if [ -f "$models/bge-small-random/model.onnx" ] && [ -f "$models/ggml-tiny-random-multi.bin" ]; then
  t=$(mktemp -d)
  cat > "$t/config.toml" <<CFG
[agent]
state_dir = "var"
[embedding]
model_dir = "$models/bge-small-random"
[asr]
model = "$models/ggml-tiny-random-multi.bin"
[voice]
vad = "silero"
vad_model = "$root/.deps/models/silero_vad_v5.onnx"
CFG
  "$qemu" -L /usr/aarch64-linux-gnu "$out/agentctl" -config "$t/config.toml" doctor 2>/dev/null > "$t/doctor.txt" || true
  rm -rf "$t/var"
  for check in database onnxruntime embedding_model asr_model voice_vad; do
    if ! grep -Eq "^ok +$check " "$t/doctor.txt"; then
      cat "$t/doctor.txt" >&2
      echo "cross-arm64: $check failed under qemu" >&2
      rm -rf "$t"
      exit 1
    fi
  done
  grep -E "^ok +(database|onnxruntime|embedding_model|asr_model|voice_vad) " "$t/doctor.txt"
  rm -rf "$t"
fi
ls -l "$out" "$out/lib"
