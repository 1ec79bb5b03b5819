#!/usr/bin/env bash
# Runs the benchmarks and measurements and writes bench/RESULTS.md.
# Expects `make build build-arm64 testmodels` to have run (make bench does).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
go=$(scripts/deps.sh --which-go)
tags=sqlite_fts5,whisper
out=bench/RESULTS.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p bench

if [ ! -x bin/linux-arm64/agent ]; then
  scripts/deps.sh whisper-arm64
  scripts/cross-arm64.sh "-s -w" "$tags" >&2
fi

echo "bench: Go benchmarks" >&2
"$go" test -tags "$tags" -run '^$' -bench 'EmbedOne|EmbedOneInCall|EmbedBatch32|EmbedOneInt8' -benchtime 30x ./pkg/embed/ > "$tmp/embed.txt" 2>&1 || { cat "$tmp/embed.txt"; exit 1; }
"$go" test -tags "$tags" -run '^$' -bench 'IdleAfterEmbed' -benchtime 3x ./pkg/embed/ >> "$tmp/embed.txt" 2>&1 || { cat "$tmp/embed.txt"; exit 1; }
"$go" test -tags "$tags" -run '^$' -bench 'Transcribe3s' -benchtime 5x ./pkg/asr/ > "$tmp/asr.txt" 2>&1 || { cat "$tmp/asr.txt"; exit 1; }
"$go" test -tags "$tags" -run '^$' -bench 'VecKNN' -benchtime 50x ./pkg/store/ > "$tmp/knn.txt" 2>&1 || { cat "$tmp/knn.txt"; exit 1; }
"$go" test -tags "$tags" -run '^$' -bench 'LoopOverhead' -benchtime 200x ./pkg/agent/ > "$tmp/loop.txt" 2>&1 || { cat "$tmp/loop.txt"; exit 1; }
"$go" test -tags "$tags" -run '^$' -bench 'RequestBytes' -benchtime 3x ./pkg/assistant/ > "$tmp/bytes.txt" 2>&1 || { cat "$tmp/bytes.txt"; exit 1; }
"$go" test -tags "$tags" -run '^$' -bench 'Conversations100' -benchtime 1x ./pkg/runner/ > "$tmp/runner.txt" 2>&1 || { cat "$tmp/runner.txt"; exit 1; }
echo "bench: memory" >&2
"$go" test -tags "$tags" -run '^$' -bench 'HybridRetrieval' -benchtime 1000x -timeout 30m ./pkg/memory/ > "$tmp/mem.txt" 2>&1 || { cat "$tmp/mem.txt"; exit 1; }
"$go" test -tags "$tags" -run '^$' -bench 'CachedBlock' -benchtime 2000x ./pkg/memory/ >> "$tmp/mem.txt" 2>&1 || { cat "$tmp/mem.txt"; exit 1; }
"$go" test -tags "$tags" -run '^$' -bench 'Compression' -benchtime 20x ./pkg/memory/ >> "$tmp/mem.txt" 2>&1 || { cat "$tmp/mem.txt"; exit 1; }
"$go" test -tags "$tags" -run '^$' -bench 'RSSGrowth100k' -benchtime 1x ./pkg/memory/ >> "$tmp/mem.txt" 2>&1 || { cat "$tmp/mem.txt"; exit 1; }
echo "bench: mcp" >&2
"$go" test -tags "$tags" -run '^$' -bench 'CallOverhead' -benchtime 2000x ./pkg/mcp/ > "$tmp/mcp.txt" 2>&1 || { cat "$tmp/mcp.txt"; exit 1; }
echo "bench: wecom" >&2
"$go" test -tags "$tags" -run '^$' -bench 'CallbackAck' -benchtime 2000x ./pkg/channel/wecom/ > "$tmp/wecom.txt" 2>&1 || { cat "$tmp/wecom.txt"; exit 1; }
"$go" test -tags "$tags" -run '^$' -bench 'RoundTrip' -benchtime 1000x ./pkg/channel/plugin/ > "$tmp/plugin.txt" 2>&1 || { cat "$tmp/plugin.txt"; exit 1; }
"$go" test -tags "$tags" -count=1 -run 'TestWeComCrashMidFlood|TestWeComExactlyOnceAcrossKill9' -v ./cmd/agent/ > "$tmp/crash.txt" 2>&1 || { cat "$tmp/crash.txt"; exit 1; }
echo "bench: scheduler" >&2
"$go" test -tags "$tags" -run '^$' -bench 'FireTime1000|StoredJobs10k' -benchtime 1x ./pkg/scheduler/ > "$tmp/sched.txt" 2>&1 || { cat "$tmp/sched.txt"; exit 1; }
echo "bench: voice" >&2
"$go" test -tags "$tags" -run '^$' -bench 'EndToTranscript3s' -benchtime 10x ./pkg/channel/voice/ > "$tmp/voice.txt" 2>&1 || { cat "$tmp/voice.txt"; exit 1; }
"$go" test -tags "$tags" -run '^$' -bench 'TranscriptToLLM' -benchtime 1000x ./pkg/daemon/ >> "$tmp/voice.txt" 2>&1 || { cat "$tmp/voice.txt"; exit 1; }
"$go" test -tags "$tags" -run '^$' -bench 'VersusCLI3s' -benchtime 5x -timeout 30m ./pkg/asr/ >> "$tmp/voice.txt" 2>&1 || { cat "$tmp/voice.txt"; exit 1; }
"$go" test -tags "$tags" -run '^$' -bench 'Prob|Detector3s' -benchtime 2000x ./pkg/vad/ > "$tmp/vad.txt" 2>&1 || { cat "$tmp/vad.txt"; exit 1; }
echo "bench: sandbox, documents, exec" >&2
"$go" test -run '^$' -bench 'RunTrue|BwrapFloor|DirectTrue' -benchtime 200x ./pkg/sandbox/ > "$tmp/sandbox.txt" 2>&1 || { cat "$tmp/sandbox.txt"; exit 1; }
"$go" test -tags "$tags" -run '^$' -bench 'ReadPDF50' -benchtime 20x ./pkg/readdoc/ >> "$tmp/sandbox.txt" 2>&1 || { cat "$tmp/sandbox.txt"; exit 1; }
"$go" test -tags "$tags" -run '^$' -bench 'ExecConcurrent4' -benchtime 3x ./pkg/daemon/ >> "$tmp/sandbox.txt" 2>&1 || { cat "$tmp/sandbox.txt"; exit 1; }
echo "bench: web_fetch" >&2
"$go" test -run '^$' -bench 'FetchArticle1MB' -benchtime 1000x ./pkg/webfetch/ > "$tmp/web.txt" 2>&1 || { cat "$tmp/web.txt"; exit 1; }
echo "bench: custom tools and skills" >&2
"$go" test -run '^$' -bench 'CallPython|CallShell|DirectPython' -benchtime 100x ./pkg/customtool/ > "$tmp/custom.txt" 2>&1 || { cat "$tmp/custom.txt"; exit 1; }
"$go" test -run '^$' -bench 'Index20' ./pkg/skills/ >> "$tmp/custom.txt" 2>&1 || { cat "$tmp/custom.txt"; exit 1; }
echo "bench: wecom_bot" >&2
"$go" test -tags "$tags" -run '^$' -bench 'WeComBot' -benchtime 50x ./pkg/daemon/ > "$tmp/wecombot.txt" 2>&1 || { cat "$tmp/wecombot.txt"; exit 1; }
echo "bench: offline and privacy" >&2
"$go" test -tags "$tags" -run '^$' -bench 'CommandCache' -benchtime 100x ./pkg/daemon/ > "$tmp/offline.txt" 2>&1 || { cat "$tmp/offline.txt"; exit 1; }
"$go" test -run '^$' -bench 'Redact1KB|RedactChinese10KB|RedactResult10KB' ./pkg/redact/ >> "$tmp/offline.txt" 2>&1 || { cat "$tmp/offline.txt"; exit 1; }
echo "bench: fleet (NATS JetStream)" >&2
"$go" test -tags "$tags" -run '^$' -bench 'FleetIngress|FleetMove10k|FleetBot' -benchtime 3x -timeout 20m ./pkg/daemon/ > "$tmp/fleet.txt" 2>&1 || { cat "$tmp/fleet.txt"; exit 1; }
"$go" test -run '^$' -bench 'Hop' -benchtime 1x ./pkg/fleet/ >> "$tmp/fleet.txt" 2>&1 || { cat "$tmp/fleet.txt"; exit 1; }
echo "bench: packages and the real-systemd test" >&2
rm -f dist/agent_*.deb
deb_amd64=$(scripts/deb.sh amd64 bin)
deb_arm64=$(scripts/deb.sh arm64 bin/linux-arm64)
scripts/test-systemd.sh "$deb_amd64" > "$tmp/systemd.txt" 2>&1 || { cat "$tmp/systemd.txt"; exit 1; }
echo "bench: daemon start-up and RSS" >&2
"$go" run ./scripts/measure -bin bin/agent -models testdata/models > "$tmp/measure.txt"
"$go" run -tags "$tags" ./scripts/measure-voice -bin bin/agent -models testdata/models > "$tmp/measure-voice.txt"
echo "bench: thin host (issue 14), the daemon before and after, same run" >&2
# The revision before the daemon became a thin host: built here with the
# same flags, started the same way, alternately with the current one.
host_base=2415511
daemon_lines() { git ls-tree -r --name-only "$1" pkg/daemon | grep '\.go$' | grep -v '_test\.go$' | while read -r f; do git show "$1:$f"; done | wc -l; }
if git cat-file -e "$host_base^{commit}" 2>/dev/null; then
  wt="$tmp/before-src"
  mkdir -p "$wt" "$tmp/before/lib"
  git archive "$host_base" | tar -x -C "$wt"
  cp bin/lib/* "$tmp/before/lib/" 2>/dev/null || true
  (cd "$wt" && "$go" build -trimpath -tags "$tags" -o "$tmp/before/agent" ./cmd/agent)
  : > "$tmp/host.txt"
  "$go" build -o "$tmp/measure" ./scripts/measure
  for round in 1 2; do
    "$tmp/measure" -bin "$tmp/before/agent" -only "no models" -runs 10 -noheader -label "before ($host_base), first start, round $round" >> "$tmp/host.txt"
    "$tmp/measure" -bin bin/agent -only "no models" -runs 10 -noheader -label "after ($(git rev-parse --short HEAD)), first start, round $round" >> "$tmp/host.txt"
    "$tmp/measure" -bin "$tmp/before/agent" -only "no models" -runs 10 -noheader -restart -label "before ($host_base), restart, round $round" >> "$tmp/host.txt"
    "$tmp/measure" -bin bin/agent -only "no models" -runs 10 -noheader -restart -label "after ($(git rev-parse --short HEAD)), restart, round $round" >> "$tmp/host.txt"
  done
  host_lines="pkg/daemon without tests: $(daemon_lines "$host_base") lines before, $(daemon_lines HEAD) lines after."
fi
echo "bench: slow-body flood and idle voice sockets" >&2
"$go" run ./scripts/measure-flood -bin bin/agent -models testdata/models > "$tmp/flood.txt"
"$go" run ./scripts/measure-flood -bin bin/agent -models testdata/models -max-conns 4096 -voice-clients 0 > "$tmp/flood4096.txt"

ref=""
ref_rounds=""
if [ -d scripts/ref/node_modules/onnxruntime-node ] && [ -f scripts/ref/bench.mjs ]; then
  echo "bench: reference (onnxruntime-node)" >&2
  ref=$(node scripts/ref/bench.mjs testdata/models/bge-small-random 2>/dev/null || true)
  # EmbedOne against the reference in interleaved rounds, so that a
  # disturbance of this shared machine falls on both sides alike.
  "$go" test -tags "$tags" -c -o "$tmp/embed.test" ./pkg/embed/
  ours=() theirs=()
  for _ in 1 2 3 4 5; do
    ours+=("$(cd pkg/embed && "$tmp/embed.test" -test.run '^$' -test.bench '^BenchmarkEmbedOne$' -test.benchtime 30x |
      awk '/^BenchmarkEmbedOne/ {printf "%.3f", $3/1e6}')")
    theirs+=("$(node scripts/ref/bench.mjs testdata/models/bge-small-random one 2>/dev/null)")
  done
  median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
  if [[ " ${ours[*]} ${theirs[*]} " == *"  "* ]]; then
    ref_rounds="EmbedOne rounds: a round gave no figure (ours: ${ours[*]}; onnxruntime-node: ${theirs[*]})."
  else
    mo=$(median "${ours[@]}") mt=$(median "${theirs[@]}")
    ref_rounds="EmbedOne, 5 rounds of 30 runs, ours and the reference taking turns: ours ${ours[*]} ms (median $mo),
onnxruntime-node ${theirs[*]} ms (median $mt): overhead $(awk -v o="$mo" -v t="$mt" 'BEGIN {printf "%+.1f", (o/t-1)*100}') % (target <= 10 %)."
  fi
fi

# bench_rows FILE: "name | ns/op | extra metrics" rows from go test -bench output
bench_rows() {
  awk '/^Benchmark/ {
    name=$1; sub(/-[0-9]+$/, "", name); sub(/^Benchmark/, "", name)
    line="| " name " | " sprintf("%.2f ms", $3/1e6)
    extra=""
    for (i=5; i<NF; i+=2) extra=extra sprintf("%s %s ", $i, $(i+1))
    print line " | " extra "|"
  }' "$1"
}

size() { stat -c %s "$1" | awk '{printf "%.1f MB", $1/1e6}'; }
cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
{
  echo "# Benchmark results"
  echo
  echo "Written by \`make bench\` (scripts/bench.sh). Models are random-weight test models of the real"
  echo "architectures (bge-small-en-v1.5: 12 layers, 384 hidden; whisper tiny: 4+4 layers, 384 state),"
  echo "so latency and memory are representative and the outputs are meaningless."
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "- machine: $(uname -m), ${cpu:-unknown CPU}, $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB RAM"
  echo "- go: $("$go" env GOVERSION); ONNX Runtime 1.24.1; whisper.cpp 1.9.1; revision $(git rev-parse --short HEAD 2>/dev/null || echo none)"
  echo
  echo "## Binaries"
  echo
  echo "| binary | amd64 | arm64 |"
  echo "|---|---|---|"
  echo "| agent | $(size bin/agent) | $(size bin/linux-arm64/agent) |"
  echo "| agentctl | $(size bin/agentctl) | $(size bin/linux-arm64/agentctl) |"
  echo "| libonnxruntime.so.1 (shipped beside them) | $(size bin/lib/libonnxruntime.so.1) | $(size bin/linux-arm64/lib/libonnxruntime.so.1) |"
  echo
  echo "## Daemon start-up and memory (targets: READY <= 1 s without models; RSS <= 40 MB idle, <= 400 MB with both models)"
  echo
  cat "$tmp/measure.txt"
  echo
  if [ -s "$tmp/host.txt" ]; then
    echo "## Thin host (issue 14): the daemon before and after, same run (no models; target: no regression)"
    echo
    echo "First start: a fresh state directory (the database is created: every schema step runs, the new 'mailbox'"
    echo "step included). Restart: the same state directory again, as after a reboot or an upgrade has run once."
    echo
    echo "| binary | start to READY (median of 10) | all models loaded | RSS after settling |"
    echo "|---|---|---|---|"
    cat "$tmp/host.txt"
    echo
    echo "$host_lines"
    echo
  fi
  echo "## Embedding (bge-small shape, 2 threads; targets: one sentence <= 12 ms, within 10 % of onnxruntime-node)"
  echo
  echo "EmbedOneInt8: the same shape with int8 linear layers (ONNX Runtime's dynamic quantisation, as the bge int8"
  echo "exports are). IdleAfterEmbed: CPU the process uses in the second after one embedding (worker threads spin only"
  echo "while a run is in flight: session.intra_op.allow_spinning with session.force_spinning_stop). Runs go to a thread of"
  echo "the session's own while the caller waits in Go's poller (onnxrt.ThreadRunner); EmbedOneInCall = the same run in a cgo"
  echo "call from the goroutine, where Go's sysmon thread wakes every 20 us and preempts ONNX Runtime's spinning threads."
  echo "Both sides time 30 runs after 3 untimed ones, each with ONNX Runtime's memory arena (ours shrinks it 3 s after"
  echo "the last run of over 256 tokens; one sentence never triggers that)."
  echo
  echo "| benchmark | time/op | metrics |"
  echo "|---|---|---|"
  bench_rows "$tmp/embed.txt"
  if [ -n "$ref" ]; then
    echo
    echo "Reference measured in the same run, same model and tokens, onnxruntime-node 1.24.1 (2 intra-op threads):"
    echo
    echo "$ref"
    echo
    echo "$ref_rounds"
  fi
  echo
  echo "## Speech recognition (whisper tiny shape, 3 s of espeak-ng speech, 2 threads)"
  echo
  echo "| benchmark | time/op | metrics |"
  echo "|---|---|---|"
  bench_rows "$tmp/asr.txt"
  echo
  echo "## sqlite-vec KNN (top 5, 384-d, one user's partition; cosine vs l2, scalar kernels on x86)"
  echo
  echo "| benchmark | time/op | metrics |"
  echo "|---|---|---|"
  bench_rows "$tmp/knn.txt"
  echo
  echo "## Long-term memory (targets: hybrid retrieval at 100k facts p50 <= 40 ms; cache-hit memory block <= 0.5 ms p99; RSS growth at 100k facts <= 60 MB, anonymous)"
  echo
  echo "Hybrid = embed the query (bge-small shape, ONNX Runtime, 2 threads) + the scope's 1-bit vectors in RAM (popcount"
  echo "Hamming scan, max(64, 8 x k) candidates re-ranked by exact cosine read from SQLite by primary key through a memory map; issue 21,"
  echo "before: sqlite-vec's KNN) + FTS5 (the query's rarest words within 4,000 postings, ranked in the index and only the"
  echo "best 4n rows checked; restricted to the user's tag when the user holds fewer facts than those postings; trigram"
  echo "index for CJK; word frequencies cached; on two cores it runs after the embedding, beside the vector search) +"
  echo "reciprocal rank fusion + loading the top 5. Facts: synthetic sentences (Zipf over a 20k-word vocabulary) with random 384-d"
  echo "vectors; users=1 puts all n facts in one user's partition (worst case), users=100 spreads them. knn = the vector"
  echo "search alone (k=20), keyword = the keyword search alone, index-load = loading the scope's index on its first search"
  echo "(once per scope and process). 1,000 searches per case, each query new (p99 = the 11th slowest). Targets (issue 21): hybrid p50 <= 20 ms, p99 <= 35 ms; knn <= 2 ms. CachedBlock = the voice path's memory block + system prompt from the cache (repeat: same utterance;"
  echo "new: a new utterance, which waits up to the 2 ms fast budget for a fresh retrieval). Compression = the compressor's"
  echo "own work per 35-message batch with an instant LLM (5 facts embedded, deduplicated, indexed), batches back to back"
  echo "(a backlog: the embedder's arena is shrunk only once they stop). RSSGrowth100k = the process's RSS after 100k facts"
  echo "stored and 200 searches less before (after a GC), split into anonymous memory (heaps, the bit index, caches: what the"
  echo "target is about) and file-backed pages (the database's pages mapped by the connections, page cache the kernel"
  echo "reclaims under pressure; since the memory map, RSS counts them)."
  echo
  echo "| benchmark | time/op | metrics |"
  echo "|---|---|---|"
  bench_rows "$tmp/mem.txt"
  echo
  echo "## MCP tool call (target: our client's overhead over a raw JSON-RPC exchange <= 1 ms p50)"
  echo
  echo "manager = a tools/call through pkg/mcp (the official Go SDK client, result mapping, caps) to a stdio server;"
  echo "raw = the same tools/call written by hand as JSON-RPC over the same kind of pipe to the same server. Means per call."
  echo
  echo "| benchmark | time/op | metrics |"
  echo "|---|---|---|"
  bench_rows "$tmp/mcp.txt"
  echo
  echo "## Channel plugins (agent.channel.v1, issue 37)"
  echo
  echo "One round trip through a [channels.NAME] plugin channel: a message line in, stored and acked, its turn (gate, runner,"
  echo "agent loop, session in SQLite, an llmtest model answering at once), the reply committed to the outbox and written as a"
  echo "send line. The plugin is in-process (pipes): the daemon's side is measured. 8 senders, 1000 round trips after 20 warm-up."
  echo
  echo "| benchmark | time/op | metrics |"
  echo "|---|---|---|"
  bench_rows "$tmp/plugin.txt"
  echo
  echo "## WeCom callbacks (target: acknowledgement p99 <= 20 ms at 200 requests/s, none lost)"
  echo
  echo "Encrypted callbacks over loopback HTTP at a steady 200/s: signature check, AES decrypt, XML parse, inbox insert"
  echo "(SQLite, WAL), then the 200. The benchmark fails if any request is not acknowledged or any acknowledged message"
  echo "is missing from the inbox."
  echo
  echo "| benchmark | time/op | metrics |"
  echo "|---|---|---|"
  bench_rows "$tmp/wecom.txt"
  echo
  echo "Crash tests (the daemon binary killed with SIGKILL in the middle of a flood, then restarted; every"
  echo "acknowledged MsgId must be answered exactly once: a send in flight at the kill is resent with the same"
  echo "enable_duplicate_check request, which WeCom (and the fake, which implements the documented check) does not"
  echo "deliver twice within the interval):"
  echo
  echo '```'
  grep -o '[0-9]* sent, .*in doubt' "$tmp/crash.txt" || echo "(no summary line)"
  grep -o '[0-9]* users, [0-9]* kill -9 mid-flood: .*' "$tmp/crash.txt" || echo "(no exactly-once summary line)"
  echo '```'
  echo
  echo "## Scheduler (1,000 one-shot jobs due in the same second, real clock; storage per 10k jobs)"
  echo
  echo "| benchmark | time/op | metrics |"
  echo "|---|---|---|"
  bench_rows "$tmp/sched.txt"
  echo
  echo "## Voice channel (targets: end of utterance to final transcript <= 0.6 s for 3 s of speech, tiny shape, 2 threads;"
  echo "transcript to the first byte of the LLM request <= 5 ms with a warm cache; Go path overhead over whisper-cli <= 5 %)"
  echo
  echo "EndToTranscript3s: a 3 s espeak-ng utterance streamed as PCM frames over the agent.voice.v1 WebSocket; timed from"
  echo "the client's end frame to the final transcript frame; asr = the time inside whisper.cpp for the same utterance."
  echo "The random-weight model never emits end-of-text: budget = it decodes the whole budget for 3 s (46 tokens, what a"
  echo "real model does only on audio it cannot make sense of); sentence = decoding capped at the 15 steps a real model"
  echo "takes for this sentence (14 tokens in whisper's tokenizer + end-of-text): the cost of a real utterance;"
  echo "sentence_partials = the same streamed at real-time pace with partial transcripts on (a partial in flight at the"
  echo "end is cancelled; on two cores it still costs the final transcription CPU)."
  echo
  echo "TranscriptToLLM: a voice-profile text turn (what a final transcript becomes) over the WebSocket of the real daemon"
  echo "(conversation service, runner, agent, llm client; memory with 50 facts of the user and the bge-small-shape"
  echo "embedder loaded, block cache warm from earlier turns), timed from the client's frame write to the first byte of"
  echo "the request read on the OpenAI-compatible test server's connection. repeat = the same utterance again (cache hit);"
  echo "new = a new utterance 100 ms after the last reply (the cached block is taken, the retrieval deferred by"
  echo "memory.RefreshDelay); new_back_to_back = no pause at all, so earlier turns' retrievals and embeddings share the"
  echo "two cores with later turns. Session compression runs as in production (after a 2 s pause, at most 30 s late)."
  echo "floor = the transport alone, measured the same way in the same run: a WebSocket server in the benchmark's process"
  echo "that sends a 4 KB streaming chat request to the same model server on each text frame (no session, memory, prompt"
  echo "or tools): what this machine's scheduler and loopback cost before the daemon does anything. 1,000 turns per case"
  echo "(p99 = the 11th slowest)."
  echo
  echo "VersusCLI3s: Recognizer.Transcribe (warm, 2 threads) against whisper.cpp's own whisper-cli built from the same"
  echo "tree, same 3 s WAV, same parameters (greedy, no timestamps, en, one fallback at 1.0, our audio context, flash"
  echo "attention off as ours must be for per-call audio contexts) and the"
  echo "same decode length (a copy of the tiny model with a 64-position text context caps both at 28 tokens; the CLI"
  echo "cannot set max_tokens and random weights never end). cli_ms = the CLI's marginal cost per utterance (one"
  echo "process transcribing the file 5 times minus once, over 4); go_ms = the mean of 4 Transcribe calls; both the"
  echo "median of 5 rounds; cli_process_ms = a whole one-file CLI run."
  echo
  echo "| benchmark | time/op | metrics |"
  echo "|---|---|---|"
  bench_rows "$tmp/voice.txt"
  echo; echo "Silero VAD v5 (the real model, ONNX Runtime, 1 thread): Prob = one 32 ms window; Detector3s = end-of-utterance detection over 3 s of espeak-ng speech and silence."
  echo; echo "| benchmark | time/op | metrics |"; echo "|---|---|---|"; bench_rows "$tmp/vad.txt"
  echo; echo "RSS with 4 concurrent voice connections (target <= 500 MB; scripts/measure-voice: the daemon with its local models (Silero VAD included), 4 WebSocket clients each streaming 3 s espeak-ng utterances and waiting for the transcripts; speech workers as configured by default: one per asr.threads of CPU):"; echo; cat "$tmp/measure-voice.txt"
  echo
  echo "## Slow-body flood and idle voice sockets (targets: WeCom ack p99 <= 20 ms at 200 callbacks/s while 2,000 slow-body connections are held open, /healthz and the admin socket answering; voice clients admitted while 100 idle sockets are held)"
  echo
  echo "scripts/measure-flood: the daemon binary with its local models and WeCom enabled against the in-process fake API;"
  echo "real signed, encrypted callbacks at a steady 200/s, each on a new connection from 127.0.0.1, 15 s per scenario,"
  echo "each verified, decrypted, stored and acknowledged (dm_policy allowlist with no WeCom user listed, so no turn runs:"
  echo "the ack path, as in the CallbackAck benchmark above)."
  echo "Default limits: server.max_conns 1024 (16 kept for /healthz and /livez), max_conns_per_client 64 (loopback exempt),"
  echo "read timeout 10 s; voice: 8 connections without a hello per address, 64 in all, hello within 5 s. The flood: POSTs"
  echo "to /wecom/callback whose body trickles one byte every 10 s, 2,000 wanted; a connection the daemon closes is reopened,"
  echo "at most 500 (re)connections a second. The flood and the callbacks run on the same cores as the daemon."
  echo
  cat "$tmp/flood.txt"
  echo
  echo "The same with server.max_conns = 4096, so that the daemon holds all 2,000 slow bodies (the 10 s read timeout cuts"
  echo "each, and the flood reopens it):"
  echo
  cat "$tmp/flood4096.txt"
  echo
  echo "## Sandbox, documents and exec (issue 15; target: sandbox overhead over running \`true\` directly <= 15 ms p50)"
  echo
  echo "RunTrue: \`true\` in a bubblewrap sandbox exactly as exec runs it (user, mount, PID, IPC, UTS, cgroup and network"
  echo "namespaces, the system read-only, the caller's folder and shared/ bound, a private /tmp, the limits and"
  echo "oom_score_adj set by the shell prelude, disk accounting before and after); this run is as root, so bwrap runs as"
  echo "nobody as a root daemon's do. BwrapFloor: bwrap alone with a user and a PID namespace and /usr, the least any"
  echo "bubblewrap sandbox pays on this machine. DirectTrue: \`true\` started directly by the same process (the reference,"
  echo "same run); the overhead is RunTrue minus DirectTrue. ReadPDF50:"
  echo "read_document of a 50-page PDF with CJK and ASCII text on every page (~35,000 characters): pdfinfo, then pdftotext"
  echo "in the sandbox, splitting and rendering. ExecConcurrent4: the real daemon (in the benchmark process) with 4 users'"
  echo "exec runs at once, each a Python process building a 2-million-item list then sleeping 1 s, through the agent loop;"
  echo "rss_peak_mb = the daemon's own RSS sampled every 20 ms, sandbox_peak_mb = the runs' processes together."
  echo
  echo "| benchmark | time/op | metrics |"
  echo "|---|---|---|"
  bench_rows "$tmp/sandbox.txt"
  echo
  echo "## web_fetch (issue 16; target: fetch + extraction of a 1 MB article page <= 100 ms p50, no RSS growth)"
  echo
  echo "FetchArticle1MB: a 1 MB news page (two thirds of it the article's text, the rest navigation, ads, scripts and"
  echo "comments) from a local server, through the SSRF guard (dial-time check), decoded, reduced to its article by"
  echo "go-readability and written as Markdown (converted as far as web_fetch can return), 1,000 fetches one after"
  echo "another after 100 warm-up ones. rss_growth_mb = RSS after the 1,000 less RSS after the warm-up (both after a GC"
  echo "that returns memory to the OS)."
  echo
  echo "| benchmark | time/op | metrics |"
  echo "|---|---|---|"
  bench_rows "$tmp/web.txt"
  echo
  echo "## Runtime tools and skills (issue 17)"
  echo
  echo "CallPython: one call of a tool made with create_tool (Python, a word count) as the agent loop makes it: the registry,"
  echo "the argument check, the caller's folder, a bubblewrap sandbox, the interpreter's start (python3 -I), the wrapper, the"
  echo "function, the result; 100 calls one after another. CallShell: the same tool in sh. DirectPython: the reference, same"
  echo "run: /usr/bin/python3 -I started directly with the same function, no sandbox. Index20: the skills index of 20"
  echo "installed skills with descriptions the length of real ones; index_bytes = what it adds to every system prompt."
  echo
  echo "| benchmark | time/op | metrics |"
  echo "|---|---|---|"
  bench_rows "$tmp/custom.txt"
  echo
  echo "## WeCom AI Bot long connection (issue 18)"
  echo
  echo "WeComBotFirstText: the real daemon subscribed to a local endpoint speaking the AI Bot protocol (pkg/wecom/aibottest),"
  echo "an instant local model streaming \"Hello there\": from the message frame being sent to the first reply stream frame"
  echo "carrying the model's words (the inbox commit, the DM gate, the turn, the stream's first frame \"…\" before it). 50"
  echo "messages from 8 users one after another. WeComBotReconnect: from the endpoint dropping the connection to the daemon"
  echo "subscribed again; the first retry waits a jittered 0.5-1 s by design."
  echo
  echo "| benchmark | time/op | metrics |"
  echo "|---|---|---|"
  bench_rows "$tmp/wecombot.txt"
  echo
  echo "## Offline and privacy (issue 19)"
  echo
  echo "CommandCacheHit: the real daemon with the generated embedding model loaded, a hardware device's text command answered"
  echo "from the command cache: the utterance embedded, the device's entries compared, the MCP tool (an idempotent lights_on on"
  echo "a local MCP server) called again, the stored reply sent; from the text frame's write to the final reply frame, 100"
  echo "commands. Target: <= 20 ms p99. CommandCacheViaLLM: the same command from a new device each time, answered by an"
  echo "instant local fake model (a tool call, the MCP tool, the answer: two model round trips), the reference of the same run."
  echo "Not measured: end of a spoken utterance to the reply (that adds the speech recogniser, measured above, to the hit)."
  echo "Redact1KB: [privacy] redact over 1 KB of text holding a phone number, an e-mail, a card number and a plate, and"
  echo "putting them back; Redact1KBClean: 1 KB with nothing to redact. RedactChinese10KB: 10 KB of Chinese text holding 20"
  echo "values in mixed forms (fullwidth, dotted, slashed, parenthesised, NBSP and zero-width spaces, spaced ID, IDN e-mail)."
  echo "RedactResult10KB: that text as a tool's result in a conversation that has its values (each found again in any form)."
  echo
  echo "| benchmark | time/op | metrics |"
  echo "|---|---|---|"
  bench_rows "$tmp/offline.txt"
  echo
  echo "## The appliance install (issue 20)"
  echo
  echo "make deb (dpkg-deb; lintian clean but for the one explained override) and make test-systemd: Debian bookworm booted with"
  echo "systemd as PID 1 in systemd-nspawn, the amd64 package installed with dpkg -i, the service checked under the real"
  echo "systemd. Goal for the exposure score: <= 4.0 while the sandbox (and on a Jetson the GPU) still work."
  echo
  echo "| package | size |"
  echo "|---|---|"
  echo "| $(basename "$deb_amd64") | $(size "$deb_amd64") |"
  echo "| $(basename "$deb_arm64") | $(size "$deb_arm64") |"
  echo
  sed -n 's/^test-systemd: //p; /^[a-zA-Z]/p' dist/systemd-test.txt | grep -v '^package:' | sed 's/^/- /'
  echo
  echo "### The soak under systemd (make soak; not rerun by make bench, which would take 35 minutes more)"
  echo
  if [ -f bench/soak.md ]; then cat bench/soak.md; else echo "Not measured yet: run make soak."; fi
  echo
  echo "## A fleet of boxes on NATS JetStream (issue 22; target: ingress acknowledgement p99 <= 20 ms at 200 callbacks/s)"
  echo
  echo "Two daemons on this machine and a real NATS server (nats-server embedded in the test binary, JetStream on file"
  echo "storage), WeCom's callbacks signed and encrypted as WeCom sends them, a fake model. FleetIngress: callbacks to the"
  echo "ingress box at the rate named, open loop, for 20 users homed on the other box; ack = callback sent to \"success\""
  echo "(verify, decrypt, persist to the stream, JetStream's acknowledgement); to_home_llm = callback sent to the home"
  echo "box's model request for it (the hop, the home box's inbox and the start of its turn; at 200/s the home box's"
  echo "turns queue on the two cores the whole fleet shares here). Hop = published by the ingress until the home box's"
  echo "handler has it (the stream, the home entry, the consumer) at 20 messages/s. FleetMove10k = \`agentctl fleet move\`"
  echo "of a user with 10,000 facts (384-d vectors kept: both boxes load the same model) and a 200-message"
  echo "conversation: settle, snapshot, object store, restore, switch, purge. FleetBot = AI Bot messages one at a"
  echo "time, the ingress holding the bot's connection (a fake WeCom endpoint on loopback): home=ingress answered there,"
  echo "home=other answered by the other box, the message through the stream and every frame of the reply stream back"
  echo "through the ingress; first_frame = message to the stream's first frame at WeCom, finished = to the final frame."
  echo
  echo "| benchmark | time/op | metrics |"
  echo "|---|---|---|"
  bench_rows "$tmp/fleet.txt"
  echo
  echo "## Agent loop overhead (40-message session, one tool step + answer, in-process fake LLM, real SQLite; target: <= 2 ms p99 per step)"
  echo
  echo "| benchmark | time/op | metrics |"
  echo "|---|---|---|"
  bench_rows "$tmp/loop.txt"
  echo
  echo "## Bytes sent to the model per turn (issue 21; target: <= 6 KB for hello)"
  echo
  echo "A WeCom user's turns with every built-in tool of the day and two MCP servers (the reference everything and"
  echo "filesystem servers: 54 tools), the bundled prompt files and the embedding model (random weights) loaded."
  echo "B/hello: the request of a greeting. B/6-turns: every request of a six-turn conversation (hello, weather,"
  echo "a reminder, a PDF summary, listing reminders, goodbye; each tool step included). B/6-turns-all-tools: the"
  echo "same requests had every tool been offered, as before tools were chosen per turn. find_tools/6-turns: how"
  echo "often the scripted model did not find the tool it wanted offered and had to ask for it."
  echo
  echo "| benchmark | time/op | metrics |"
  echo "|---|---|---|"
  bench_rows "$tmp/bytes.txt"
  echo
  echo "## 100 concurrent conversations through the runner (5 turns each, fake LLM 100 ms per turn; order per key checked; one conversation alone = 500 ms)"
  echo
  echo "| benchmark | time/op | metrics |"
  echo "|---|---|---|"
  bench_rows "$tmp/runner.txt"
} > "$out"
echo "bench: wrote $out" >&2
cat "$out"
