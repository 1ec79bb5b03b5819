package embed

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/sugarme/tokenizer"
	"github.com/sugarme/tokenizer/normalizer"
	"github.com/sugarme/tokenizer/pretrained"
)

// Tokenizer turns text into the token ids a BERT-family (WordPiece) model
// expects. It is pure Go, needs no native library, and is safe for
// concurrent use.
//
// github.com/sugarme/tokenizer loads tokenizer.json and runs the BERT
// pre-tokenizer and the WordPiece model. The steps where it differs from
// Hugging Face are done here instead: normalisation (see bertNormalizer);
// added tokens typed in the text, such as a literal "[SEP]", which sugarme
// mostly fails to match (its overlap resolution sorts matches by pattern
// and then skips the earlier ones); invalid UTF-8, which made sugarme
// repeat part of the text; truncation and the [CLS]/[SEP] wrapping.
type Tokenizer struct {
	tk      *tokenizer.Tokenizer
	norm    bertNormalizer
	hasNorm bool
	raw     []addedToken // matched on the raw text
	normed  []addedToken // matched on normalised text
	prefix  []int        // ids before the text ([CLS])
	suffix  []int        // ids after the text ([SEP])
	padID   int
	// windowed is false when an added token contains whitespace, which
	// would make cutting long texts at whitespace unsafe.
	windowed bool
}

type addedToken struct {
	content        string
	id             int
	lstrip, rstrip bool
}

// tokenizerJSON is the part of tokenizer.json read here (sugarme reads the
// whole file too, for the vocabulary and the pre-tokenizer).
type tokenizerJSON struct {
	AddedTokens []struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		Lstrip     bool   `json:"lstrip"`
		Rstrip     bool   `json:"rstrip"`
		Normalized *bool  `json:"normalized"`
		Special    bool   `json:"special"`
	} `json:"added_tokens"`
	Normalizer *struct {
		Type               string `json:"type"`
		CleanText          *bool  `json:"clean_text"`
		HandleChineseChars *bool  `json:"handle_chinese_chars"`
		StripAccents       *bool  `json:"strip_accents"`
		Lowercase          *bool  `json:"lowercase"`
	} `json:"normalizer"`
	PreTokenizer *struct {
		Type string `json:"type"`
	} `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Padding       *struct {
		PadID *int `json:"pad_id"`
	} `json:"padding"`
	Model struct {
		Type     string         `json:"type"`
		UnkToken string         `json:"unk_token"`
		Vocab    map[string]int `json:"vocab"`
	} `json:"model"`
}

// LoadTokenizer reads a Hugging Face tokenizer.json. Only BERT-style
// tokenizers are accepted (WordPiece model, BertNormalizer or none,
// BertPreTokenizer): for anything else the ids could silently differ from
// what the model was trained with.
func LoadTokenizer(path string) (t *Tokenizer, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("embed: load tokenizer: %w", err)
	}
	var cfg tokenizerJSON
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("embed: load tokenizer %s: %w", path, err)
	}
	if typ := cfg.Model.Type; typ != "" && typ != "WordPiece" {
		return nil, fmt.Errorf("embed: load tokenizer %s: unsupported model type %q (want WordPiece)", path, typ)
	}
	if len(cfg.Model.Vocab) == 0 {
		return nil, fmt.Errorf("embed: load tokenizer %s: empty WordPiece vocabulary", path)
	}
	if cfg.PreTokenizer == nil || cfg.PreTokenizer.Type != "BertPreTokenizer" {
		typ := "none"
		if cfg.PreTokenizer != nil {
			typ = cfg.PreTokenizer.Type
		}
		return nil, fmt.Errorf("embed: load tokenizer %s: unsupported pre_tokenizer %q (want BertPreTokenizer)", path, typ)
	}
	t = &Tokenizer{windowed: true}
	if n := cfg.Normalizer; n != nil {
		if n.Type != "BertNormalizer" {
			return nil, fmt.Errorf("embed: load tokenizer %s: unsupported normalizer %q (want BertNormalizer)", path, n.Type)
		}
		// Defaults and the meaning of strip_accents: null are Hugging Face's.
		opt := func(p *bool, def bool) bool {
			if p == nil {
				return def
			}
			return *p
		}
		t.hasNorm = true
		t.norm = bertNormalizer{
			cleanText:          opt(n.CleanText, true),
			handleChineseChars: opt(n.HandleChineseChars, true),
			lowercase:          opt(n.Lowercase, true),
		}
		t.norm.stripAccents = opt(n.StripAccents, t.norm.lowercase)
	}

	// sugarme panics on some malformed files instead of returning errors.
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("embed: load tokenizer %s: %v", path, r)
		}
	}()
	t.tk, err = pretrained.FromFile(path)
	if err != nil {
		return nil, fmt.Errorf("embed: load tokenizer %s: %w", path, err)
	}
	if t.tk.GetModel() == nil || t.tk.GetPreTokenizer() == nil {
		return nil, fmt.Errorf("embed: load tokenizer %s: no WordPiece model or pre-tokenizer", path)
	}

	for _, a := range cfg.AddedTokens {
		if a.Content == "" {
			continue
		}
		normalized := !a.Special
		if a.Normalized != nil {
			normalized = *a.Normalized
		}
		tok := addedToken{content: a.Content, id: a.ID, lstrip: a.Lstrip, rstrip: a.Rstrip}
		if strings.ContainsAny(a.Content, " \t\n\r") {
			t.windowed = false
		}
		if normalized && t.hasNorm {
			tok.content = t.norm.normalize(a.Content)
			if tok.content == "" {
				continue
			}
			t.normed = append(t.normed, tok)
		} else {
			t.raw = append(t.raw, tok)
		}
	}

	vocabID := func(tok string) (int, bool) {
		for _, a := range cfg.AddedTokens {
			if a.Content == tok {
				return a.ID, true
			}
		}
		id, ok := cfg.Model.Vocab[tok]
		return id, ok
	}
	if t.prefix, t.suffix, err = specialsAround(cfg.PostProcessor, vocabID); err != nil {
		return nil, fmt.Errorf("embed: load tokenizer %s: %w", path, err)
	}
	if cfg.Padding != nil && cfg.Padding.PadID != nil {
		t.padID = *cfg.Padding.PadID
	} else if id, ok := vocabID("[PAD]"); ok {
		t.padID = id
	}
	return t, nil
}

// specialsAround reads what the post-processor puts around a single text.
func specialsAround(raw json.RawMessage, vocabID func(string) (int, bool)) (prefix, suffix []int, err error) {
	var pp struct {
		Type   string `json:"type"`
		Single []struct {
			SpecialToken *struct {
				ID string `json:"id"`
			} `json:"SpecialToken"`
			Sequence *struct {
				ID string `json:"id"`
			} `json:"Sequence"`
		} `json:"single"`
		SpecialTokens map[string]struct {
			IDs []int `json:"ids"`
		} `json:"special_tokens"`
		Cls []any `json:"cls"`
		Sep []any `json:"sep"`
	}
	if len(raw) == 0 || string(raw) == "null" {
		// No post-processor: fall back to the BERT convention, which is
		// what every model this package serves was trained with.
		cls, ok1 := vocabID("[CLS]")
		sep, ok2 := vocabID("[SEP]")
		if !ok1 || !ok2 {
			return nil, nil, errors.New("no post_processor and no [CLS]/[SEP] in the vocabulary")
		}
		return []int{cls}, []int{sep}, nil
	}
	if err := json.Unmarshal(raw, &pp); err != nil {
		return nil, nil, fmt.Errorf("post_processor: %w", err)
	}
	switch pp.Type {
	case "TemplateProcessing":
		seen := false
		for _, piece := range pp.Single {
			switch {
			case piece.Sequence != nil:
				seen = true
			case piece.SpecialToken != nil:
				st, ok := pp.SpecialTokens[piece.SpecialToken.ID]
				if !ok {
					return nil, nil, fmt.Errorf("post_processor: special token %q not defined", piece.SpecialToken.ID)
				}
				if seen {
					suffix = append(suffix, st.IDs...)
				} else {
					prefix = append(prefix, st.IDs...)
				}
			}
		}
		if !seen {
			return nil, nil, errors.New("post_processor: single template has no $A")
		}
		return prefix, suffix, nil
	case "BertProcessing", "RobertaProcessing":
		id := func(pair []any) (int, error) {
			if len(pair) != 2 {
				return 0, errors.New("post_processor: malformed cls/sep")
			}
			f, ok := pair[1].(float64)
			if !ok {
				return 0, errors.New("post_processor: malformed cls/sep id")
			}
			return int(f), nil
		}
		cls, err := id(pp.Cls)
		if err != nil {
			return nil, nil, err
		}
		sep, err := id(pp.Sep)
		if err != nil {
			return nil, nil, err
		}
		return []int{cls}, []int{sep}, nil
	}
	return nil, nil, fmt.Errorf("unsupported post_processor %q", pp.Type)
}

// Specials returns how many ids Encode adds around a text (2 for BERT).
func (t *Tokenizer) Specials() int { return len(t.prefix) + len(t.suffix) }

// PadID is the id used to pad batches.
func (t *Tokenizer) PadID() int { return t.padID }

// Encode returns text's token ids, wrapped in the model's special tokens
// ([CLS] ... [SEP]). With maxTokens > 0 the text is truncated so that the
// result, special tokens included, has at most maxTokens ids. Empty and
// whitespace-only texts give just the special tokens; invalid UTF-8 is
// read as U+FFFD (which the BERT normaliser drops).
func (t *Tokenizer) Encode(text string, maxTokens int) ([]int, error) {
	return t.encode(text, maxTokens, t.windowed)
}

func (t *Tokenizer) encode(text string, maxTokens int, windowed bool) ([]int, error) {
	nSpecial := len(t.prefix) + len(t.suffix)
	if maxTokens > 0 && maxTokens < nSpecial {
		return nil, fmt.Errorf("embed: tokenize: max tokens %d leaves no room for the %d special tokens", maxTokens, nSpecial)
	}
	text = strings.ToValidUTF8(text, "\uFFFD")
	limit := -1
	if maxTokens > 0 {
		limit = maxTokens - nSpecial
	}
	var ids []int
	var err error
	if limit < 0 || !windowed {
		ids, err = t.pieces(text)
	} else {
		ids, err = t.piecesWindowed(text, limit)
	}
	if err != nil {
		return nil, err
	}
	if limit >= 0 && len(ids) > limit {
		ids = ids[:limit]
	}
	out := make([]int, 0, len(ids)+nSpecial)
	out = append(out, t.prefix...)
	out = append(out, ids...)
	return append(out, t.suffix...), nil
}

// piecesWindowed tokenises only as much of text as the first limit pieces
// need, so that a megabyte of text costs no more than a page. Every piece
// covers at least one byte and words never span whitespace, so the pieces
// of a prefix cut just before an ASCII whitespace byte are a prefix of the
// whole text's pieces (FuzzEmbedTokenize checks this).
func (t *Tokenizer) piecesWindowed(text string, limit int) ([]int, error) {
	for window := 6*limit + 256; ; window *= 2 {
		cut := len(text)
		if window < len(text) {
			if i := strings.IndexAny(text[window:], " \t\n\r"); i >= 0 {
				cut = window + i
			}
		}
		ids, err := t.pieces(text[:cut])
		if err != nil || cut == len(text) || len(ids) >= limit {
			return ids, err
		}
	}
}

// pieces tokenises text without special tokens or truncation.
func (t *Tokenizer) pieces(text string) (ids []int, err error) {
	defer func() {
		if r := recover(); r != nil {
			ids, err = nil, fmt.Errorf("embed: tokenize: %v", r)
		}
	}()
	for _, sec := range splitAdded(text, t.raw) {
		if sec.id >= 0 {
			ids = append(ids, sec.id)
			continue
		}
		s := sec.text
		if t.hasNorm {
			s = t.norm.normalize(s)
		}
		for _, sub := range splitAdded(s, t.normed) {
			if sub.id >= 0 {
				ids = append(ids, sub.id)
				continue
			}
			if ids, err = t.wordPieces(sub.text, ids); err != nil {
				return nil, err
			}
		}
	}
	return ids, nil
}

// wordPieces runs sugarme's BertPreTokenizer and WordPiece on normalised
// text and appends the ids to dst.
func (t *Tokenizer) wordPieces(s string, dst []int) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return dst, nil
	}
	pt, err := t.tk.GetPreTokenizer().PreTokenize(tokenizer.NewPreTokenizedString(s))
	if err != nil {
		return nil, fmt.Errorf("embed: tokenize: %w", err)
	}
	model := t.tk.GetModel()
	for _, w := range pt.GetSplits(normalizer.NormalizedTarget, tokenizer.Byte) {
		if w.Value == "" {
			continue
		}
		toks, err := model.Tokenize(w.Value)
		if err != nil {
			return nil, fmt.Errorf("embed: tokenize: %w", err)
		}
		for _, tok := range toks {
			dst = append(dst, tok.Id)
		}
	}
	return dst, nil
}

type section struct {
	text string
	id   int // the added token's id, or -1 for plain text
}

// splitAdded splits text around added tokens the way Hugging Face does:
// scanning left to right, the longest token starting at each position wins.
// Plain sections next to a token with lstrip/rstrip lose that whitespace;
// empty sections are dropped.
func splitAdded(text string, tokens []addedToken) []section {
	if len(tokens) == 0 || text == "" {
		if text == "" {
			return nil
		}
		return []section{{text: text, id: -1}}
	}
	var out []section
	start := 0
	var prev *addedToken
	plain := func(end int, next *addedToken) {
		s := text[start:end]
		if prev != nil && prev.rstrip {
			s = strings.TrimLeftFunc(s, isJSSpace)
		}
		if next != nil && next.lstrip {
			s = strings.TrimRightFunc(s, isJSSpace)
		}
		if s != "" {
			out = append(out, section{text: s, id: -1})
		}
	}
	var first [256]bool
	for _, tk := range tokens {
		first[tk.content[0]] = true
	}
	for i := 0; i < len(text); {
		if !first[text[i]] {
			i++
			continue
		}
		var best *addedToken
		for k := range tokens {
			tk := &tokens[k]
			if strings.HasPrefix(text[i:], tk.content) && (best == nil || len(tk.content) > len(best.content)) {
				best = tk
			}
		}
		if best == nil {
			i++
			continue
		}
		plain(i, best)
		out = append(out, section{text: best.content, id: best.id})
		i += len(best.content)
		start = i
		prev = best
	}
	plain(len(text), nil)
	return out
}
