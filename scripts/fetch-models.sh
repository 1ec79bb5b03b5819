#!/usr/bin/env bash
# Fetches the real model weights into models/ on a machine with internet
# access, verifying each file's SHA-256. Re-running skips verified files.
#
#   scripts/fetch-models.sh [all|bge-en|bge-zh|bge-en-int8|bge-zh-int8|whisper-tiny|whisper-base|vad] ...
#   MODELS_DIR=/usr/local/share/agent/models scripts/fetch-models.sh
#
# Copy the result to an offline appliance with scripts/install.sh, or rsync
# models/ yourself. Tests never use these files.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${MODELS_DIR:-$root/models}
hf=${HF_ENDPOINT:-https://huggingface.co}

# name | destination (under $dir) | source | SHA-256 ("-" = not yet pinned, see below)
# source: a URL path under $hf, or npm:PACKAGE@VERSION:FILE for a file inside
# an npm package (fetched with `npm pack` from the configured registry; no
# package scripts run).
manifest=(
  "whisper-tiny|ggml-tiny.bin|ggerganov/whisper.cpp/resolve/main/ggml-tiny.bin|be07e048e1e599ad46341c8d2a135645097a538221678b7acdd1b1919c6e1b21"
  "whisper-tiny-en|ggml-tiny.en.bin|ggerganov/whisper.cpp/resolve/main/ggml-tiny.en.bin|921e4cf8686fdd993dcd081a5da5b6c365bfde1162e72b08d75ac75289920b1f"
  "whisper-base|ggml-base.bin|ggerganov/whisper.cpp/resolve/main/ggml-base.bin|60ed5bc3dd14eea856493d334349b405782ddcaf0028d4b5df4088345fba2efe"
  "bge-en|bge-small-en-v1.5/model.onnx|BAAI/bge-small-en-v1.5/resolve/main/onnx/model.onnx|-"
  "bge-en|bge-small-en-v1.5/tokenizer.json|BAAI/bge-small-en-v1.5/resolve/main/tokenizer.json|-"
  "bge-zh|bge-small-zh-v1.5/model.onnx|BAAI/bge-small-zh-v1.5/resolve/main/onnx/model.onnx|-"
  "bge-zh|bge-small-zh-v1.5/tokenizer.json|BAAI/bge-small-zh-v1.5/resolve/main/tokenizer.json|-"
  # int8 exports (ONNX Runtime dynamic quantisation): half the memory of the
  # fp32 models above, for a box short of it (README: "Which embedding model").
  "bge-en-int8|bge-small-en-v1.5-int8/model.onnx|Xenova/bge-small-en-v1.5/resolve/main/onnx/model_quantized.onnx|-"
  "bge-en-int8|bge-small-en-v1.5-int8/tokenizer.json|Xenova/bge-small-en-v1.5/resolve/main/tokenizer.json|-"
  "bge-zh-int8|bge-small-zh-v1.5-int8/model.onnx|Xenova/bge-small-zh-v1.5/resolve/main/onnx/model_quantized.onnx|-"
  "bge-zh-int8|bge-small-zh-v1.5-int8/tokenizer.json|Xenova/bge-small-zh-v1.5/resolve/main/tokenizer.json|-"
  "vad|silero_vad_v5.onnx|npm:@ricky0123/vad-web@0.0.31:package/dist/silero_vad_v5.onnx|2623a2953f6ff3d2c1e61740c6cdb7168133479b267dfef114a4a3cc5bdd788f"
)
# The bge hashes could not be read on the offline build machines. For "-"
# entries the first verified download records its hash in $dir/SHA256SUMS
# (trust on first use) and every later run checks against it; pin the
# printed value here once confirmed.

want=("$@")
if [ ${#want[@]} -eq 0 ]; then
  want=(whisper-tiny bge-en)
  if command -v npm >/dev/null; then want+=(vad); else echo "fetch-models: npm not found: skipping the Silero VAD model (the energy detector is used)" >&2; fi
fi
[ "${want[0]}" = all ] && want=(whisper-tiny whisper-tiny-en whisper-base bge-en bge-zh vad)
mkdir -p "$dir"
sums="$dir/SHA256SUMS"
touch "$sums"

recorded() { awk -v f="$1" '$2 == f {print $1}' "$sums"; }

npm_file() { # npm_file PACKAGE@VERSION:FILE OUT: one file out of an npm package tarball
  local spec=${1%:*} file=${1##*:} out=$2 tmp
  command -v npm >/dev/null || { echo "fetch-models: npm is required for ${spec}" >&2; exit 1; }
  tmp=$(mktemp -d)
  if ! (cd "$tmp" && npm pack --silent "$spec" >/dev/null) || ! tar -xzf "$tmp"/*.tgz -C "$tmp" "$file"; then
    rm -rf "$tmp"
    echo "fetch-models: could not fetch $file from $spec" >&2
    exit 1
  fi
  mv "$tmp/$file" "$out"
  rm -rf "$tmp"
}

fetch() {
  local dest=$1 path=$2 pin=$3 out="$dir/$1"
  local expect=$pin
  [ "$expect" = - ] && expect=$(recorded "$dest")
  if [ -f "$out" ] && [ -n "$expect" ] && [ "$(sha256sum "$out" | cut -d' ' -f1)" = "$expect" ]; then
    echo "fetch-models: $dest verified"; return
  fi
  mkdir -p "$(dirname "$out")"
  echo "fetch-models: downloading $dest"
  case $path in
    npm:*) npm_file "${path#npm:}" "$out.part" ;;
    *)
      command -v curl >/dev/null || { echo "fetch-models: curl is required" >&2; exit 1; }
      curl -fL --retry 3 --retry-delay 2 -C - -o "$out.part" "$hf/$path"
      ;;
  esac
  local got
  got=$(sha256sum "$out.part" | cut -d' ' -f1)
  if [ -n "$expect" ] && [ "$got" != "$expect" ]; then
    rm -f "$out.part"
    echo "fetch-models: $dest: SHA-256 mismatch (got $got, want $expect); nothing installed" >&2
    exit 1
  fi
  mv "$out.part" "$out"
  if [ -z "$expect" ]; then
    echo "$got  $dest" >> "$sums"
    echo "fetch-models: $dest: recorded SHA-256 $got (first download; pin it in scripts/fetch-models.sh)"
  elif [ -z "$(recorded "$dest")" ]; then
    echo "$got  $dest" >> "$sums"
  fi
}

for w in "${want[@]}"; do
  found=0
  for row in "${manifest[@]}"; do
    IFS='|' read -r name dest path sha <<<"$row"
    [ "$name" = "$w" ] || continue
    found=1
    fetch "$dest" "$path" "$sha"
  done
  [ $found -eq 1 ] || { echo "fetch-models: unknown model $w" >&2; exit 2; }
done
echo "fetch-models: done; models in $dir"
