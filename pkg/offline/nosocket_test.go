package offline

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"agent/pkg/asr"
	"agent/pkg/asr/asrtest"
	"agent/pkg/embed"
	"agent/pkg/embed/embedtest"
	"agent/pkg/memory"
	"agent/pkg/nativetest"
	"agent/pkg/onnxrt"
	"agent/pkg/store"
	"agent/pkg/store/storetest"
	"agent/pkg/vad"
	"agent/pkg/vad/vadtest"
)

// The proof: TestLocalPartsOpenNoSocket runs TestNoSocketHelper (this test
// binary, re-executed) under strace, which records every socket, connect
// and bind of the child and all its threads. The helper loads and runs each
// local part, printing a marker line per part; the parent fails on any
// network socket or address in the trace, and on a missing marker (a part
// that did not run proves nothing). A control child that does dial TCP
// shows that the trace and its parsing do catch a socket.

// Environment of the helper child: the mode, and what the parent prepared.
const (
	helperEnv  = "AGENT_OFFLINE_HELPER" // "parts" or "control"
	ortEnv     = "AGENT_OFFLINE_ORT"    // libonnxruntime.so.1
	embedEnv   = "AGENT_OFFLINE_EMBED"  // generated embedding model dir
	whisperEnv = "AGENT_OFFLINE_WHISPER"
	vadEnv     = "AGENT_OFFLINE_VAD"
	dbEnv      = "AGENT_OFFLINE_DB" // directory for the memory database
)

// marker starts each line the helper prints for a part that ran.
const marker = "OFFLINE-PART "

// parts are the markers the helper must print, in order.
var parts = []string{"embed", "asr", "vad", "memory"}

// helperTimeout bounds one helper run (whisper on a random model, under
// strace, with -race on a busy two-core machine).
const helperTimeout = 5 * time.Minute

func TestLocalPartsOpenNoSocket(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		t.Skip("in the helper child")
	}
	straceBin := nativetest.LookPath(t, "strace", "apt-get install strace (scripts/deps.sh apt, or `make deps`)")
	if _, err := asr.New(asr.Config{}, nil); errors.Is(err, asr.ErrNotBuilt) {
		nativetest.Need(t, "whisper.cpp (the test was built without -tags whisper)", "go test -tags sqlite_fts5,whisper (make test sets it)", false)
	}
	lib := embedtest.ORTLibrary(t)
	if _, _, err := onnxrt.Load([]string{lib}); err != nil {
		nativetest.Missing(t, "ONNX Runtime", "`make deps` (and cgo)", err)
	}
	vadModel := vadtest.ModelPath(t)
	whisperModel := asrtest.TinyModel(t, false)
	embedDir := t.TempDir()
	if err := embedtest.Ensure(embedDir, embedtest.Tiny(), 7); err != nil {
		t.Fatal(err)
	}
	env := []string{
		ortEnv + "=" + lib, embedEnv + "=" + embedDir, whisperEnv + "=" + whisperModel,
		vadEnv + "=" + vadModel, dbEnv + "=" + t.TempDir(),
	}

	// The control: a child that dials TCP must be caught, or an empty
	// trace would prove nothing (strace not tracing, the parser blind).
	ctrl := traceHelper(t, straceBin, "control", env)
	if !strings.Contains(ctrl.out, "OFFLINE-CONTROL dialed") {
		t.Fatalf("control child did not dial:\n%s", ctrl.out)
	}
	if len(ctrl.bad) == 0 {
		t.Fatalf("control child dialed TCP but the trace shows no network socket:\n%s", ctrl.trace)
	}
	t.Logf("control (dials 127.0.0.1:9) caught: %s", strings.Join(ctrl.bad, "; "))

	// The real run.
	start := time.Now()
	run := traceHelper(t, straceBin, "parts", env)
	t.Logf("helper under strace: %v", time.Since(start).Round(time.Millisecond))
	for _, p := range parts {
		line := findMarker(run.out, p)
		if line == "" {
			t.Errorf("part %q did not report that it ran", p)
			continue
		}
		t.Logf("ran %s", line)
	}
	if !strings.Contains(run.out, "OFFLINE-HELPER-DONE") {
		t.Errorf("helper did not finish")
	}
	for _, b := range run.bad {
		t.Errorf("network syscall: %s", b)
	}
	if t.Failed() {
		t.Logf("helper output:\n%s", run.out)
	}
	if len(run.seen) == 0 {
		t.Logf("socket/connect/bind calls seen: none")
	}
	for _, s := range run.seen {
		t.Logf("seen: %s", s)
	}
}

// traced is one helper run under strace.
type traced struct {
	out   string   // the child's (and strace's) stdout and stderr
	trace string   // the raw strace output
	seen  []string // every traced call, summarised with counts
	bad   []string // the calls that touch the network
}

// traceHelper runs TestNoSocketHelper in mode under strace and parses the
// trace. The child must exit 0.
func traceHelper(t *testing.T, straceBin, mode string, env []string) traced {
	t.Helper()
	traceFile := filepath.Join(t.TempDir(), "strace.out")
	ctx, cancel := context.WithTimeout(context.Background(), helperTimeout+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, straceBin,
		"-f", "-qq", "-e", "trace=socket,socketpair,connect,bind,io_uring_setup", "-e", "signal=none",
		"-o", traceFile, "--",
		os.Args[0], "-test.run=^TestNoSocketHelper$", "-test.v", "-test.count=1",
		"-test.timeout="+helperTimeout.String())
	cmd.Env = append(append(os.Environ(), helperEnv+"="+mode), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	raw, rerr := os.ReadFile(traceFile)
	if err != nil || rerr != nil {
		t.Fatalf("helper %s under strace: %v (trace: %v)\n%s\ntrace:\n%s", mode, err, rerr, out.String(), raw)
	}
	seen, bad := parseTrace(string(raw))
	return traced{out: out.String(), trace: string(raw), seen: seen, bad: bad}
}

var (
	straceCall = regexp.MustCompile(`^(?:\[pid\s+)?\d+\]?\s+(\w+)\((.*)$`)
	saFamily   = regexp.MustCompile(`sa_family=(\w+)`)
)

// localDomains are the socket domains that cannot reach another machine:
// Unix sockets, and netlink (the kernel; glibc asks it about interfaces).
var localDomains = map[string]bool{"AF_UNIX": true, "AF_LOCAL": true, "AF_NETLINK": true}

// parseTrace reads strace -f output. seen summarises every call as
// "syscall DOMAIN xN"; bad lists, once each, the calls that are not
// provably local: a socket of another domain than localDomains (AF_INET,
// AF_INET6, AF_PACKET, a number strace cannot name), a connect or bind to
// another family than AF_UNIX, any mention of AF_INET, and io_uring (whose
// socket operations strace cannot see).
func parseTrace(raw string) (seen, bad []string) {
	counts := map[string]int{}
	badSet := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		m := straceCall.FindStringSubmatch(line)
		if m == nil {
			// "<... connect resumed>" and the like: the call's arguments
			// were on its "<unfinished ...>" line. Still, nothing may name
			// an inet family.
			if strings.Contains(line, "AF_INET") {
				badSet[line] = true
			}
			continue
		}
		name, args := m[1], m[2]
		var key string
		switch name {
		case "socket", "socketpair":
			domain, _, _ := strings.Cut(args, ",")
			domain = strings.TrimSpace(domain)
			key = name + " " + domain
			if !localDomains[domain] {
				badSet[key] = true
			}
		case "connect", "bind":
			fam := "?"
			if f := saFamily.FindStringSubmatch(args); f != nil {
				fam = f[1]
			}
			key = name + " " + fam
			if fam != "AF_UNIX" && fam != "AF_LOCAL" {
				badSet[key] = true
			}
		default:
			key = name
			badSet[key] = true
		}
		if strings.Contains(args, "AF_INET") {
			badSet[key] = true
		}
		counts[key]++
	}
	for k, n := range counts {
		seen = append(seen, fmt.Sprintf("%s x%d", k, n))
	}
	for k := range badSet {
		bad = append(bad, k)
	}
	sort.Strings(seen)
	sort.Strings(bad)
	return seen, bad
}

// findMarker returns the helper's marker line for part, or "".
func findMarker(out, part string) string {
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, marker); ok && (rest == part || strings.HasPrefix(rest, part+":")) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// TestNoSocketHelper is the child of TestLocalPartsOpenNoSocket; run
// alone, without its environment, it does nothing.
func TestNoSocketHelper(t *testing.T) {
	switch os.Getenv(helperEnv) {
	case "":
		return
	case "control":
		if c, err := net.Dial("tcp", "127.0.0.1:9"); err == nil { // refused or not: the socket was opened
			c.Close()
		}
		fmt.Println("OFFLINE-CONTROL dialed")
	case "parts":
		runParts(t)
		fmt.Println("OFFLINE-HELPER-DONE")
	default:
		t.Fatalf("%s=%q", helperEnv, os.Getenv(helperEnv))
	}
}

// runParts loads and runs every local part, printing a marker per part.
func runParts(t *testing.T) {
	ctx := context.Background()
	lib := os.Getenv(ortEnv)

	// Embeddings: ONNX Runtime (pkg/onnxrt) on a generated bge-shaped model.
	emb, err := embed.New(embed.Config{ModelDir: os.Getenv(embedEnv), LibraryPath: lib, Threads: 1}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("embed.New: %v", err)
	}
	defer emb.Close()
	sentences := []string{"The user walks the dog at seven.", "用户每周三去游泳", "Meeting with Dr. Chen on Friday"}
	vecs, err := emb.Embed(ctx, sentences)
	if err != nil || len(vecs) != len(sentences) || len(vecs[0]) != emb.Dim() {
		t.Fatalf("Embed: %d vectors, %v", len(vecs), err)
	}
	fmt.Printf("%sembed: %d sentences -> %d-dim vectors\n", marker, len(vecs), emb.Dim())

	// Speech recognition: whisper.cpp on the random tiny model.
	audio := voiced(2 * time.Second)
	rec, err := asr.New(asr.Config{ModelPath: os.Getenv(whisperEnv), Language: "en", Threads: asrtest.Threads, Workers: 1, MaxTokens: 4}, nil)
	if err != nil {
		t.Fatalf("asr.New: %v", err)
	}
	res, err := rec.Transcribe(ctx, audio)
	if err != nil {
		t.Fatalf("Transcribe: %v", err)
	}
	rec.Close()
	fmt.Printf("%sasr: transcribed %v of audio in %v (%d segments)\n", marker, res.AudioDuration, res.Elapsed.Round(time.Millisecond), len(res.Segments))

	// Voice activity: the real Silero VAD model, window by window and
	// through a Detector.
	vm, err := vad.Load(os.Getenv(vadEnv), []string{lib}, 1)
	if err != nil {
		t.Fatalf("vad.Load: %v", err)
	}
	defer vm.Close()
	st := vm.NewStream()
	var maxP float32
	windows := 0
	for i := 0; i+vad.WindowSamples <= len(audio); i += vad.WindowSamples {
		p, err := st.Prob(audio[i : i+vad.WindowSamples])
		if err != nil {
			t.Fatalf("Prob: %v", err)
		}
		maxP = max(maxP, p)
		windows++
	}
	det, err := vm.NewDetector(vad.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := det.Feed(audio); err != nil {
		t.Fatalf("Feed: %v", err)
	}
	fmt.Printf("%svad: %d windows, max speech probability %.3f, detector heard=%v\n", marker, windows, maxP, det.Heard())

	// Memory: SQLite (pkg/store) with the ONNX embedder for vectors.
	db := storetest.OpenAt(t, filepath.Join(os.Getenv(dbEnv), store.FileName))
	mem := memory.New(db.DB(), memory.Config{DedupThreshold: 1}, nil, nil)
	defer mem.Close()
	if err := mem.SetEmbedder(ctx, emb, "tiny"); err != nil {
		t.Fatalf("SetEmbedder: %v", err)
	}
	mem.Wait()
	for _, s := range sentences {
		if _, err := mem.Add(ctx, "wecom:alice", memory.Input{Text: s}); err != nil {
			t.Fatalf("memory Add: %v", err)
		}
	}
	hits, err := mem.Search(ctx, "wecom:alice", "dog walking in the morning", 3)
	if err != nil || len(hits) == 0 || hits[0].VectorRank == 0 {
		t.Fatalf("memory Search: %+v %v (want a vector match)", hits, err)
	}
	stats, err := mem.Stats(ctx, "")
	if err != nil || stats.Facts != len(sentences) || stats.Unembedded != 0 {
		t.Fatalf("memory Stats: %+v %v", stats, err)
	}
	fmt.Printf("%smemory: %d facts embedded, search found %d (top vector rank %d)\n", marker, stats.Facts, len(hits), hits[0].VectorRank)
}

// voiced is d of synthetic audio: a quarter second of silence, a
// vowel-like harmonic tone with vibrato and a smooth envelope, a quarter
// second of silence (16 kHz, amplitude below 0.5).
func voiced(d time.Duration) []float32 {
	n := int(d.Seconds() * asr.SampleRate)
	out := make([]float32, n)
	pad := asr.SampleRate / 4
	body := n - 2*pad
	phase := 0.0
	for i := range body {
		tt := float64(i) / asr.SampleRate
		f0 := 130 + 10*math.Sin(2*math.Pi*5*tt)
		phase += 2 * math.Pi * f0 / asr.SampleRate
		var s float64
		for h := 1; h <= 12; h++ {
			hz := f0 * float64(h)
			// Formant-like weights around 700 Hz and 1200 Hz.
			w := math.Exp(-math.Pow((hz-700)/250, 2)) + 0.6*math.Exp(-math.Pow((hz-1200)/300, 2)) + 0.1/float64(h)
			s += w * math.Sin(float64(h)*phase)
		}
		env := math.Sin(math.Pi * float64(i) / float64(body))
		out[pad+i] = float32(0.15 * env * s)
	}
	return out
}

// The trace parser on strace -f lines of each kind: local sockets are
// seen but allowed, anything that could reach the network is bad.
func TestParseTrace(t *testing.T) {
	raw := `101 socket(AF_UNIX, SOCK_STREAM|SOCK_CLOEXEC, 0) = 3
101 connect(3, {sa_family=AF_UNIX, sun_path="/run/x.sock"}, 110) = 0
102 socket(AF_NETLINK, SOCK_RAW|SOCK_CLOEXEC, NETLINK_ROUTE) = 4
103 socket(AF_INET6, SOCK_DGRAM|SOCK_CLOEXEC, IPPROTO_IP) = -1 EAFNOSUPPORT (Address family not supported by protocol)
104 connect(5, {sa_family=AF_INET, sin_port=htons(9), sin_addr=inet_addr("127.0.0.1")}, 16 <unfinished ...>
105 <... connect resumed>) = -1 ECONNREFUSED (Connection refused)
106 bind(6, {sa_family=AF_PACKET, sll_protocol=htons(ETH_P_ALL)}, 20) = 0
107 io_uring_setup(8, {...}) = 7
`
	seen, bad := parseTrace(raw)
	wantSeen := "bind AF_PACKET x1,connect AF_INET x1,connect AF_UNIX x1,io_uring_setup x1,socket AF_INET6 x1,socket AF_NETLINK x1,socket AF_UNIX x1"
	wantBad := "bind AF_PACKET,connect AF_INET,io_uring_setup,socket AF_INET6"
	if got := strings.Join(seen, ","); got != wantSeen {
		t.Errorf("seen %s\nwant %s", got, wantSeen)
	}
	if got := strings.Join(bad, ","); got != wantBad {
		t.Errorf("bad %s\nwant %s", got, wantBad)
	}
}
