// Package embed computes sentence embeddings on the device: a BERT-family
// ONNX model (bge-small by default) run by ONNX Runtime through
// github.com/yalue/onnxruntime_go, with the Hugging Face WordPiece
// tokenizer reproduced in pure Go (see Tokenizer).
//
// A model directory holds model.onnx and tokenizer.json
// (scripts/fetch-models.sh puts them there). Vectors are pooled (the [CLS]
// token for bge, the attention-masked mean for MiniLM-type models) and
// L2-normalised, so a dot product is the cosine similarity.
package embed

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"agent/pkg/clock"
	"agent/pkg/onnxrt"
)

// Config configures New. Zero values take the defaults.
type Config struct {
	ModelDir    string // holds model.onnx and tokenizer.json
	LibraryPath string // path to libonnxruntime.so.1; "" = search (see onnxrt.Candidates)
	Pooling     string // "cls" (bge, default) | "mean" (MiniLM-type)
	Threads     int    // intra-op threads, default 2
	MaxTokens   int    // default 512 (including [CLS]/[SEP])
	BatchSize   int    // default 8
	// Provider is where inference runs (onnxrt.ProviderCPU by default).
	// When a GPU provider cannot be set up, New logs why and runs on the
	// CPU; ProviderFallback tells.
	Provider onnxrt.Provider
	// ArenaIdle is how long after the last large run (a batch of long
	// texts) the memory that run took goes back to the system; default 3 s.
	// Large runs in a burst reuse it.
	ArenaIdle time.Duration
	// Clock times ArenaIdle (nil: the wall clock).
	Clock clock.Clock

	noArena bool // tests: no memory arena, as when it cannot be shrunk
}

const (
	// PoolingCLS takes the first ([CLS]) token's hidden state (bge).
	PoolingCLS = "cls"
	// PoolingMean averages the hidden states over the attention mask
	// (sentence-transformers MiniLM models).
	PoolingMean = "mean"

	// ModelFile and TokenizerFile are the names New expects in ModelDir.
	ModelFile     = "model.onnx"
	TokenizerFile = "tokenizer.json"

	defaultThreads   = 2
	defaultMaxTokens = 512
	// defaultBatchSize: ONNX Runtime's arena keeps the peak of the largest
	// batch it ran. 32 texts of a few dozen tokens left 87 MB more resident
	// on bge-small, 8 left 27 MB, and ran no slower per text.
	defaultBatchSize = 8
	defaultArenaIdle = 3 * time.Second

	// attentionBudget caps batch × seq² per inference call. Attention
	// scores take batch × heads × seq² floats, several times over, and
	// ONNX Runtime keeps its peak; 32×128² bounds one buffer to ~25 MB for
	// a 12-head model, so 32 long texts run as 16 batches of 2 instead of
	// one of 32 (which would need ~0.4 GB per buffer on a 2 GB device).
	attentionBudget = 32 * 128 * 128
)

// ErrModelMissing means model.onnx or tokenizer.json is not in the model
// directory. The wrapping error names the file and the fix.
var ErrModelMissing = errors.New("embedding model missing")

// ErrClosed is returned by Embed after Close.
var ErrClosed = errors.New("embed: embedder closed")

// Embedder turns texts into L2-normalised vectors. It is safe for
// concurrent use: tokenisation runs in the callers' goroutines, inference
// is serialised (ONNX Runtime sessions do allow concurrent runs, but on the
// two-core target they only contend for the same cores, and each would
// hold its own activation memory).
type Embedder struct {
	cfg      Config
	log      *slog.Logger
	tok      *Tokenizer
	session  *session
	inputs   []string // model input names, in the order fed
	output   string
	outRank  int // 3: [batch,seq,hidden]; 2: [batch,hidden], already pooled
	dim      int
	provider string       // the execution provider sessions run on
	fallback error        // why Config.Provider is not used; nil when it is
	runMu    sync.Mutex   // one inference at a time
	closeMu  sync.RWMutex // Embed holds it shared, Close exclusively
	closed   bool
	// closeOnce runs Close's work once; later calls wait for it
	closeOnce sync.Once
	closeErr  error
	live      atomic.Int64 // native values created and not yet destroyed
	lifetime  atomic.Int64 // native values created, ever (tests)

	// The session's memory arena (onnx.go): kept through a burst of large
	// runs, shrunk once they stop.
	arena       bool           // the session has its CPU arena
	largeAt     time.Time      // when the last large run ended (runMu)
	shrinkArmed bool           // an idle wait is pending (runMu)
	done        chan struct{}  // closed by Close: the idle wait ends
	idle        sync.WaitGroup // the idle wait
	shrinks     atomic.Int64   // arena shrinks done (tests)
}

func (c Config) withDefaults() (Config, error) {
	if c.Pooling == "" {
		c.Pooling = PoolingCLS
	}
	if c.Pooling != PoolingCLS && c.Pooling != PoolingMean {
		return c, fmt.Errorf("embed: invalid pooling %q (want %q or %q)", c.Pooling, PoolingCLS, PoolingMean)
	}
	if c.Threads <= 0 {
		c.Threads = defaultThreads
	}
	if c.MaxTokens <= 0 {
		c.MaxTokens = defaultMaxTokens
	}
	if c.BatchSize <= 0 {
		c.BatchSize = defaultBatchSize
	}
	if c.ArenaIdle <= 0 {
		c.ArenaIdle = defaultArenaIdle
	}
	c.Clock = clock.Or(c.Clock)
	if err := onnxrt.CheckProvider(c.Provider.Name); err != nil {
		return c, fmt.Errorf("embed: %w", err)
	}
	if c.Provider.Name == "" {
		c.Provider.Name = onnxrt.ProviderCPU
	}
	return c, nil
}

// New loads the tokenizer, ONNX Runtime (see onnxrt.Candidates and
// onnxrt.Load) and the model, checks the model's inputs and outputs, and
// runs one probe inference to learn the embedding size. Errors wrap
// ErrModelMissing or onnxrt.ErrRuntimeMissing when a file or the library
// is missing.
func New(cfg Config, logger *slog.Logger) (*Embedder, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ModelDir == "" {
		return nil, fmt.Errorf("embed: %w: no model directory configured; set it and fetch the model with scripts/fetch-models.sh (or `make models`)", ErrModelMissing)
	}
	modelPath := filepath.Join(cfg.ModelDir, ModelFile)
	tokPath := filepath.Join(cfg.ModelDir, TokenizerFile)
	for _, p := range []string{modelPath, tokPath} {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("embed: %w: %s not found; fetch it with scripts/fetch-models.sh (or `make models`)", ErrModelMissing, p)
		}
	}
	tok, err := LoadTokenizer(tokPath)
	if err != nil {
		return nil, err
	}
	if cfg.MaxTokens < tok.Specials()+1 {
		return nil, fmt.Errorf("embed: max tokens %d leaves no room for text besides the %d special tokens", cfg.MaxTokens, tok.Specials())
	}
	version, libPath, err := onnxrt.Load(onnxrt.Candidates(cfg.LibraryPath, onnxrt.ExeDir()))
	if err != nil {
		return nil, fmt.Errorf("embed: %w", err)
	}
	if cfg.LibraryPath != "" && libPath != cfg.LibraryPath {
		logger.Warn("ONNX Runtime was already loaded from another path; the configured one is not used",
			"configured", cfg.LibraryPath, "loaded", libPath)
	}

	e := &Embedder{cfg: cfg, log: logger, tok: tok, done: make(chan struct{})}
	if err := e.inspect(modelPath); err != nil {
		return nil, err
	}
	dim, err := e.start(modelPath, cfg.Provider)
	if err != nil && !cfg.Provider.IsCPU() {
		// A GPU that cannot be used must not cost the office its memory:
		// the CPU does the same work, slower.
		logger.Warn("embedding: the configured execution provider cannot be used; running on the CPU",
			"provider", cfg.Provider.Name, "err", err)
		e.fallback = err
		dim, err = e.start(modelPath, onnxrt.Provider{Name: onnxrt.ProviderCPU})
	}
	if err != nil {
		return nil, err
	}
	e.dim = dim
	logger.Info("embedding model loaded", "model", modelPath, "dim", e.dim, "pooling", cfg.Pooling,
		"threads", cfg.Threads, "max_tokens", cfg.MaxTokens, "provider", e.provider, "onnxruntime", version, "library", libPath)
	return e, nil
}

// start opens the session on provider p and runs one probe inference,
// which checks the whole path once and learns the size when the model
// leaves it symbolic.
func (e *Embedder) start(modelPath string, p onnxrt.Provider) (dim int, err error) {
	if err := e.openSession(modelPath, p); err != nil {
		return 0, err
	}
	e.provider = p.Name
	probe, err := e.Embed(context.Background(), []string{"probe"})
	if err != nil {
		e.session.Destroy()
		e.session = nil
		return 0, fmt.Errorf("embed: probe %s: %w", modelPath, err)
	}
	return len(probe[0]), nil
}

// Provider is the execution provider inference runs on, and why the
// configured one is not used (nil when it is).
func (e *Embedder) Provider() (name string, fallback error) { return e.provider, e.fallback }

// inspect reads the model's inputs and outputs and decides how to feed and
// read it.
func (e *Embedder) inspect(modelPath string) error {
	ins, outs, err := readSignature(modelPath)
	if err != nil {
		// Let ONNX Runtime have a go: it reads more formats, and when the
		// file is broken its error says more.
		e.log.Debug("reading the model signature directly failed; asking ONNX Runtime", "err", err)
		if ins, outs, err = ortSignature(modelPath); err != nil {
			return fmt.Errorf("embed: load model %s: %w", modelPath, err)
		}
	}
	have := map[string]bool{}
	for _, in := range ins {
		switch in.name {
		case "input_ids", "attention_mask", "token_type_ids":
		default:
			return fmt.Errorf("embed: model %s: unsupported input %q (want input_ids, attention_mask and optionally token_type_ids)", modelPath, in.name)
		}
		if !in.tensor || in.elem != onnxInt64 || len(in.dims) != 2 {
			return fmt.Errorf("embed: model %s: input %s is %s, want an int64 tensor [batch, seq]", modelPath, in.name, in)
		}
		have[in.name] = true
		e.inputs = append(e.inputs, in.name)
	}
	for _, n := range []string{"input_ids", "attention_mask"} {
		if !have[n] {
			return fmt.Errorf("embed: model %s: missing input %s", modelPath, n)
		}
	}
	if len(outs) == 0 {
		return fmt.Errorf("embed: model %s: no outputs", modelPath)
	}
	out := outs[0]
	for _, o := range outs {
		if o.name == "last_hidden_state" {
			out = o
		}
	}
	rank := len(out.dims)
	if !out.tensor || out.elem != onnxFloat || (rank != 2 && rank != 3) {
		return fmt.Errorf("embed: model %s: output %s is %s, want a float tensor [batch, seq, hidden] (or pooled [batch, hidden])", modelPath, out.name, out)
	}
	e.output, e.outRank = out.name, rank
	if h := out.dims[rank-1]; h > 0 {
		e.dim = int(h)
	}
	if rank == 2 {
		e.log.Info("model output is already pooled; the pooling setting does not apply", "output", out.name)
	}
	return nil
}

// Dim is the embedding size.
func (e *Embedder) Dim() int { return e.dim }

// Threads is how many CPU threads one embedding keeps busy: ONNX
// Runtime's intra-op threads, or 1 on a GPU (the calling thread waits).
func (e *Embedder) Threads() int {
	if e.provider != "" && e.provider != "cpu" {
		return 1
	}
	return e.cfg.Threads
}

// Tokenizer is the embedder's tokenizer (for counting tokens, chunking).
func (e *Embedder) Tokenizer() *Tokenizer { return e.tok }

// Close releases the model. Calls of Embed in flight finish first; later
// ones return ErrClosed. The ONNX Runtime environment stays loaded (see
// onnxrt.Load). Every call returns once the model is released, with the
// first call's result.
func (e *Embedder) Close() error {
	e.closeOnce.Do(func() { e.closeErr = e.close() })
	return e.closeErr
}

func (e *Embedder) close() error {
	e.closeMu.Lock()
	e.closed = true
	close(e.done)
	e.closeMu.Unlock()
	// Nothing else reaches the session now: Embed and the idle wait check
	// closed first, and the idle wait is over once this returns.
	e.idle.Wait()
	if e.session == nil {
		return nil
	}
	if err := e.session.Destroy(); err != nil {
		return fmt.Errorf("embed: close: %w", err)
	}
	return nil
}

// Embed returns one L2-normalised vector per text, in order. Texts are
// truncated to MaxTokens tokens; empty texts are fine. Texts of similar
// length are batched together (at most BatchSize per batch, fewer for long
// texts), padded to the longest of their batch. The context is checked
// between batches and cancels a running batch.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	e.closeMu.RLock()
	defer e.closeMu.RUnlock()
	if e.closed {
		return nil, ErrClosed
	}
	out := make([][]float32, len(texts))
	if len(texts) == 0 {
		return out, nil
	}
	ids := make([][]int, len(texts))
	for i, s := range texts {
		var err error
		if ids[i], err = e.tok.Encode(s, e.cfg.MaxTokens); err != nil {
			return nil, fmt.Errorf("embed: text %d: %w", i, err)
		}
	}
	for _, batch := range plan(ids, e.cfg.BatchSize) {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("embed: %w", err)
		}
		rows := make([][]int, len(batch))
		for j, i := range batch {
			rows[j] = ids[i]
		}
		vecs, err := e.run(ctx, rows)
		if err != nil {
			return nil, err
		}
		for j, i := range batch {
			out[i] = vecs[j]
		}
	}
	return out, nil
}

// plan groups text indices into batches: sorted by length (less padding),
// at most size texts, and within attentionBudget.
func plan(ids [][]int, size int) [][]int {
	order := make([]int, len(ids))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(len(ids[a]), len(ids[b])) })
	var batches [][]int
	var cur []int
	for _, i := range order {
		n := len(ids[i]) // the longest so far, as the order is ascending
		if len(cur) > 0 && (len(cur) >= size || (len(cur)+1)*n*n > attentionBudget) {
			batches = append(batches, cur)
			cur = nil
		}
		cur = append(cur, i)
	}
	if len(cur) > 0 {
		batches = append(batches, cur)
	}
	return batches
}

// run embeds one batch.
func (e *Embedder) run(ctx context.Context, rows [][]int) ([][]float32, error) {
	hidden, mask, s, h, err := e.infer(ctx, rows)
	if err != nil {
		return nil, err
	}
	return pool(hidden, mask, len(rows), s, h, e.outRank, e.cfg.Pooling)
}

func (e *Embedder) created() {
	e.live.Add(1)
	e.lifetime.Add(1)
}

// pool reduces the model output to one L2-normalised vector per row.
// hidden is [b,s,h] (rank 3) or [b,h] (rank 2); mask is [b,s].
func pool(hidden []float32, mask []int64, b, s, h, rank int, pooling string) ([][]float32, error) {
	out := make([][]float32, b)
	acc := make([]float64, h)
	for i := range b {
		clear(acc)
		switch {
		case rank == 2:
			for k := range h {
				acc[k] = float64(hidden[i*h+k])
			}
		case pooling == PoolingMean:
			n := 0
			for j := range s {
				if mask[i*s+j] == 0 {
					continue
				}
				n++
				row := hidden[(i*s+j)*h : (i*s+j+1)*h]
				for k, v := range row {
					acc[k] += float64(v)
				}
			}
			for k := range acc {
				acc[k] /= float64(max(n, 1))
			}
		default: // cls
			for k, v := range hidden[i*s*h : i*s*h+h] {
				acc[k] = float64(v)
			}
		}
		var norm float64
		for _, v := range acc {
			norm += v * v
		}
		norm = math.Sqrt(norm)
		if math.IsNaN(norm) || math.IsInf(norm, 0) {
			return nil, errors.New("embed: the model produced non-finite values")
		}
		vec := make([]float32, h)
		for k, v := range acc {
			if norm > 0 {
				v /= norm
			}
			vec[k] = float32(v)
		}
		out[i] = vec
	}
	return out, nil
}
