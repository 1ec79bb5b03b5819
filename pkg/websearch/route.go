package websearch

import (
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// topic is what a query is about, for routing.
type topic int

const (
	topicGeneral topic = iota
	topicCode          // repositories, code, issues: GitHub first
	topicML            // models, datasets, spaces: Hugging Face first
)

func (t topic) String() string {
	switch t {
	case topicCode:
		return "code"
	case topicML:
		return "ml"
	}
	return "general"
}

// Word lists for routing. English terms match whole words (or phrases of
// whole words); Chinese terms match as substrings.
var (
	// Naming the platform settles it.
	codePlatform = []string{"github", "gitlab", "github.com"}
	mlPlatform   = []string{"huggingface", "hugging face", "huggingface.co", "hf hub", "hf.co", "hf-mirror"}

	// Strong signals: one is enough.
	codeStrong = []string{"repository", "repositories", "source code", "open source", "open-source",
		"pull request", "pull requests", "stack trace", "stacktrace", "sdk", "codebase", "git clone",
		"代码", "源码", "源代码", "开源项目", "仓库", "代码库"}
	mlStrong = []string{"dataset", "datasets", "checkpoint", "checkpoints", "gguf", "safetensors", "lora", "qlora",
		"fine-tune", "fine-tuned", "fine-tuning", "finetune", "finetuned", "finetuning", "pretrained", "pre-trained",
		"llm", "llms", "model weights", "open-weight", "open-weights", "text-to-image", "text-to-speech", "sentence-transformers",
		"数据集", "大模型", "预训练", "微调", "语料", "语料库", "权重"}

	// Weak signals: two are needed, one of them a programming word
	// ("Excel function error", "package delivery error", "repo rate"
	// and "WPS 函数报错" are office questions).
	codeTech = []string{"npm", "pypi", "pip", "crate", "crates", "golang", "rust", "python", "javascript", "typescript",
		"java", "kotlin", "c++", "cpp", "php", "ruby", "compiler", "segfault", "exception", "git", "编译器"}
	codeWeak = []string{"repo", "repos", "library", "libraries", "framework", "package", "module",
		"api", "cli", "function", "implementation", "parser", "issue", "issues", "bug", "bugs", "error",
		"compile", "panic", "example", "examples", "plugin",
		"库", "函数", "报错", "编译", "接口", "插件", "框架"}

	// "model" and "space" mean ML only next to an ML word: not "Tesla
	// model 3", "business model", "office space".
	modelWords = []string{"model", "models", "space", "spaces", "模型"}
	mlContext  = []string{"ai", "ml", "machine learning", "deep learning", "neural", "nlp", "language", "embedding", "embeddings",
		"speech", "asr", "tts", "whisper", "vision", "image", "diffusion", "stable diffusion", "classification",
		"detection", "segmentation", "ocr", "translation", "transformer", "transformers", "bert", "llama", "qwen",
		"mistral", "gemma", "phi", "deepseek", "chatglm", "yi", "onnx", "quantized", "quantization", "inference",
		"weights", "tokenizer", "gradio", "streamlit", "reranker", "rerank", "vector", "multimodal", "generative",
		"人工智能", "语音", "识别", "向量", "嵌入", "图像", "视觉", "生成", "翻译", "推理", "量化", "神经网络", "深度学习", "机器学习", "多模态"}
	// 7b, 13B, 0.5b, 70b: parameter counts.
	paramCount = regexp.MustCompile(`(?i)^\d+(\.\d+)?[bm]$`)
)

// classify routes a query: code, ML or general.
func classify(q string) topic {
	words, text := tokens(q)
	has := func(list []string) int { // how many of list occur
		n := 0
		for _, t := range list {
			if match(t, words, text) {
				n++
			}
		}
		return n
	}
	code, ml := has(codePlatform)*10, has(mlPlatform)*10
	code += 2 * has(codeStrong)
	ml += 2 * has(mlStrong)
	if tech, w := has(codeTech), has(codeWeak); tech >= 1 && tech+w >= 2 {
		code += tech + w
	}
	ctx := has(mlContext)
	for _, w := range words {
		if paramCount.MatchString(w) {
			ctx++
		}
	}
	if ctx > 0 && has(modelWords) > 0 {
		ml += 2 + ctx
	}
	switch {
	case ml >= 2 && ml > code:
		return topicML
	case code >= 2:
		return topicCode
	}
	return topicGeneral
}

// tokens lowercases q into words (letters, digits and .+-_ inside words)
// and a " word word " string for phrase matching.
func tokens(q string) ([]string, string) {
	q = strings.ToLower(q)
	words := strings.FieldsFunc(q, func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '.' || r == '+' || r == '-' || r == '_')
	})
	for i, w := range words {
		words[i] = strings.Trim(w, ".-_")
	}
	return words, " " + strings.Join(words, " ") + " "
}

// match reports whether term occurs: Chinese terms as a substring, the
// rest as whole words.
func match(term string, words []string, text string) bool {
	if hasHan(term) {
		return strings.Contains(text, term)
	}
	if !strings.Contains(term, " ") {
		return slices.Contains(words, term)
	}
	return strings.Contains(text, " "+term+" ")
}

func hasHan(s string) bool {
	for _, r := range s {
		if unicode.Is(unicode.Han, r) {
			return true
		}
	}
	return false
}

// GitHub search kinds.
const (
	ghRepositories = "repositories"
	ghIssues       = "issues"
	ghCode         = "code"
)

var (
	ghIssueWords = []string{"issue", "issues", "bug", "bugs", "pull request", "pull requests", "pr", "prs", "crash", "crashes",
		"报错", "缺陷", "错误"}
	ghPRWords   = []string{"pull request", "pull requests", "pr", "prs"}
	ghCodeWords = []string{"code", "snippet", "snippets", "function", "implementation", "usage example", "代码片段", "函数", "代码"}
)

// githubKind picks the search: issues, code (needs a token) or
// repositories.
func githubKind(q string, token bool) string {
	words, text := tokens(q)
	switch {
	case anyOf(ghIssueWords, words, text):
		return ghIssues
	case token && anyOf(ghCodeWords, words, text) && !match("source code", words, text) && !match("open source", words, text):
		return ghCode
	}
	return ghRepositories
}

// anyOf reports whether one of list occurs in the query.
func anyOf(list, words []string, text string) bool {
	for _, t := range list {
		if match(t, words, text) {
			return true
		}
	}
	return false
}

// Hugging Face listings.
const (
	hfModels   = "models"
	hfDatasets = "datasets"
	hfSpaces   = "spaces"
)

func hfKind(q string) string {
	words, text := tokens(q)
	switch {
	case anyOf([]string{"dataset", "datasets", "corpus", "corpora", "数据集", "语料"}, words, text):
		return hfDatasets
	case anyOf([]string{"space", "spaces", "gradio", "streamlit", "demo", "demos"}, words, text):
		return hfSpaces
	}
	return hfModels
}

// Words that route a query but do not help the engine find it.
var (
	stopWords = []string{"a", "an", "the", "for", "of", "on", "about", "with", "that", "which", "any", "some", "me",
		"find", "search", "show", "list", "best", "top", "good", "popular", "recommended", "recommend", "what", "is", "are",
		"找", "推荐", "有哪些", "哪些", "一下", "请"}
	githubNoise = []string{"github", "github.com", "gitlab", "repo", "repos", "repository", "repositories", "project", "projects",
		"code", "source", "snippet", "snippets", "issue", "issues", "pull", "request", "requests", "pr", "prs",
		"open-source", "open", "仓库", "项目", "代码", "开源", "源码"}
	hfNoise = []string{"huggingface", "huggingface.co", "hugging", "face", "hf", "hub", "model", "models", "dataset", "datasets",
		"space", "spaces", "gradio", "streamlit", "corpus", "checkpoint", "checkpoints", "weights", "pretrained", "pre-trained", "open", "source",
		"open-source", "模型", "数据集", "大模型", "开源", "语料"}
)

// keywords drops routing and filler words from q (whole words only);
// it returns q itself when nothing would be left.
func keywords(q string, noise []string) []string {
	var out []string
	for _, f := range strings.Fields(q) {
		w := strings.ToLower(strings.Trim(f, ".,;:!?\"'()[]{}，。？！、"))
		if w == "" || contains(stopWords, w) || contains(noise, w) {
			continue
		}
		out = append(out, strings.Trim(f, ",;:!?\"'()[]{}，。？！、"))
	}
	if len(out) == 0 {
		return strings.Fields(q)
	}
	return out
}

func contains(list []string, w string) bool { return slices.Contains(list, w) }
