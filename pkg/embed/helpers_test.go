package embed

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"agent/pkg/embed/embedtest"
	"agent/pkg/nativetest"
	"agent/pkg/onnxrt"
)

var (
	requireNative = embedtest.RequireNative
	repoRoot      = embedtest.RepoRoot
	ortLibrary    = embedtest.ORTLibrary
)

// needRuntime loads ONNX Runtime for the test process.
func needRuntime(t testing.TB) string {
	t.Helper()
	lib := ortLibrary(t)
	if _, _, err := onnxrt.Load([]string{lib}); err != nil {
		requireNative(t, "ONNX Runtime ("+err.Error()+")", "`make deps`")
	}
	return lib
}

// refTool returns the node binary and scripts/ref, with its node_modules.
func refTool(t testing.TB) (node, dir string) {
	t.Helper()
	node = nativetest.Node(t)
	dir = filepath.Join(repoRoot(t), "scripts", "ref")
	for _, m := range []string{"onnxruntime-node", "@huggingface/tokenizers", "onnx-proto"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", m)); err != nil {
			requireNative(t, "scripts/ref/node_modules/"+m, "`make deps` (scripts/deps.sh node: npm ci --ignore-scripts in scripts/ref)")
		}
	}
	return node, dir
}

// runNode runs a scripts/ref script with stdin and returns stdout.
func runNode(t testing.TB, script string, stdin []byte, args ...string) []byte {
	t.Helper()
	node, dir := refTool(t)
	cmd := exec.Command(node, append([]string{filepath.Join(dir, script)}, args...)...)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s: %v\n%s", script, err, stderr.String())
	}
	return out
}

// jsonLines encodes each value as one JSON line.
func jsonLines(t testing.TB, vals ...any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, v := range vals {
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// decodeLines decodes JSON lines into a slice of T.
func decodeLines[T any](t testing.TB, data []byte) []T {
	t.Helper()
	var out []T
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		var v T
		if err := dec.Decode(&v); err == io.EOF {
			return out
		} else if err != nil {
			t.Fatalf("decode reference output: %v", err)
		}
		out = append(out, v)
	}
}

// fixtures: one tiny model (embedtest.Tiny, seed 7) and the uncased
// tokenizer, generated once per test binary.
var fixture struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fixture.dir != "" {
		os.RemoveAll(fixture.dir)
	}
	os.Exit(code)
}

func fixtureDir(t testing.TB) string {
	t.Helper()
	fixture.once.Do(func() {
		fixture.dir, fixture.err = os.MkdirTemp("", "embed-fixture-")
		if fixture.err == nil {
			fixture.err = embedtest.Ensure(fixture.dir, embedtest.Tiny(), 7)
		}
	})
	if fixture.err != nil {
		t.Fatalf("generate test model: %v", fixture.err)
	}
	return fixture.dir
}

func fixtureTokenizer(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := LoadTokenizer(filepath.Join(fixtureDir(t), TokenizerFile))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func newTestEmbedder(t testing.TB, cfg Config) *Embedder {
	t.Helper()
	cfg.LibraryPath = needRuntime(t)
	if cfg.ModelDir == "" {
		cfg.ModelDir = fixtureDir(t)
	}
	e, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

// corpus exercises the tokenizer: scripts, case, accents, CJK, emoji,
// control characters, odd whitespace, punctuation, numbers, URLs, added
// tokens typed as text, invalid UTF-8, and a text far over 512 tokens.
func corpus() []string {
	long := strings.Repeat("The quick brown fox jumps over the lazy dog; naïve Zürich café 中文 ", 120)
	return []string{
		"",
		" ",
		"\t\n \u00a0\u3000",
		"Hello, World!",
		"hello world",
		"HeLLo WoRLD, MiXeD CaSe",
		"The quick brown fox jumps over the lazy dog.",
		"café naïve Ångström Zürich résumé façade coöperate",
		"Crème brûlée à la carte, jalapeño piñata",
		"ÀÉÎÕÜ àéîõü ÇçÑñ ØøÅåÆæ ßẞ",
		"中文句子", "你好世界", "我爱北京天安门。今天天气很好！",
		"日本語のテキストです。カタカナとひらがな、がぎぐげご",
		"한국어 문장입니다. 안녕하세요",
		"Привет, мир! Ελληνικά ΟΔΟΣ ΣΟΦΟΣ Σ ΑΣ.Β",
		"مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก",
		"İstanbul IŞIK ǅemal ﬁne ﬀ",
		"emoji 👍🏽 family 👨‍👩‍👧 flag 🇩🇪 heart ❤️ smile 😀",
		"ctrl\x00chars\x01\x02\x1b[31m red \x7f del",
		"tab\there\nnewline\r\ncrlf\vvtab\fform",
		"nbsp\u00a0zwsp\u200bzwj\u200dzwnj\u200cbom\ufeffsoft\u00adhyphen",
		"ideographic\u3000space en\u2002em\u2003thin\u2009hair\u200a line\u2028para\u2029end",
		"private\ue000use \U000F0000 and replacement \ufffd char",
		"Punctuation!!! ??? ... --- ;;; ::: ''' \"\"\" ((())) [[[ ]]] {{{ }}} <<<>>> @#$%^&*_+=|\\/~`",
		"“smart quotes” ‘single’ «guillemets» — em dash – en dash … ellipsis",
		"Numbers 3.14159 1,000,000 -42 +7 1e-10 0x1F ½ ² ³ ⅓ ①②③ ٣٤٥",
		"Visit https://example.com/path?query=1&x=y#frag or mailto:someone@example.org",
		"C:\\Users\\agent\\file.txt /usr/local/bin/agent --flag=value",
		"[CLS] literal [SEP] tokens [MASK] in [PAD] text [UNK]",
		"[SEP][SEP] x [MASK][CLS]",
		"[sep] lowercase is not special, [ SEP ] neither",
		"invalid utf8 \xff\xfe\xc3\x28 bytes",
		"supercalifragilisticexpialidocious antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
		strings.Repeat("a", 101) + " " + strings.Repeat("b", 100),
		"Mr. O'Neil's dog—isn't it? can't won't y'all",
		"𝐁𝐨𝐥𝐝 𝕯𝖔𝖚𝖇𝖑𝖊 ℌ𝔢𝔩𝔩𝔬 ＦＵＬＬＷＩＤＴＨ ｈａｌｆ ｶﾀｶﾅ",
		"Ｚｅｒｏ０１２３ ＡＢＣ",
		long,
	}
}
