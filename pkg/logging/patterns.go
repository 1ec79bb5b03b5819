package logging

import (
	"regexp"
	"strings"
)

// Secret shapes the scrubber removes even when it was not told the value:
// a token the daemon fetched at run time (WeCom's access_token), a key a
// tool or an MCP server put in a URL or a header, a key pasted into an
// error by a third-party library. The name (or the scheme) stays, so a line
// still says what was there: "access_token=***", "Authorization: Bearer ***",
// "sk-***".
//
// Every rule is idempotent (its output matches itself or nothing), so
// scrubbing twice gives the same text, and each one starts on a name or a
// prefix: plain words, user names and routing keys ("wecom:alice") are left
// alone.
//
// Speed: a rule's expression is anchored and tried only where one of its
// literal starts occurs (found with strings.Index on the lower-cased text).
// Unanchored case-insensitive expressions cost about 100 ns a byte in Go's
// regexp; this costs a substring search on a line that holds none of the
// words, which is almost every line.

// secretName ends a parameter or field name that holds a credential
// (access_token, corpsecret, client_secret, x-api-key, VOICE_TOKEN,
// db_password, msg_signature ...). A rule matches from this word on: the
// start of the name is left as it is, and a name that goes on (max_tokens,
// tokenizer) is no match.
const secretName = `(?:token|secret|password|passwd|api[_\-]?key|apikey|access[_\-]?key|credentials?|signature)`

// bareValue is an unquoted value: up to a space, a quote, a separator, or
// a colon that ends it ("?access_token=abc: EOF" keeps ": EOF").
const bareValue = `[^\s&"'<>,;#)\]}:]+(?::[^\s&"'<>,;#)\]}:]+)*`

// nameStarts are the lower-case literals secretName's words begin with.
var nameStarts = []string{"token", "secret", "passw", "api", "access", "credential", "signature"}

// rule is one secret shape.
type rule struct {
	re   *regexp.Regexp // anchored (^) unless starts is nil
	repl string
	// starts are the lower-case literals a match begins with; nil: re is
	// unanchored and runs on the whole text.
	starts []string
	// words must all be in the lower-cased text for the rule to run.
	words []string
	// word: a match begins at a word boundary (the anchored expression
	// cannot see the byte before it).
	word bool
}

// queryStarts are "?name=", "&name=" and ";name=" for each name.
func queryStarts(names ...string) []string {
	var out []string
	for _, n := range names {
		out = append(out, "?"+n+"=", "&"+n+"=", ";"+n+"=")
	}
	return out
}

func anchored(expr string) *regexp.Regexp { return regexp.MustCompile(`^` + expr) }

var rules = []rule{
	// name=value: query strings, form bodies, env and TOML dumps
	// (access_token=..., corpsecret=..., api_key = "...").
	{re: anchored(`(?i)(` + secretName + `)([ \t]*=[ \t]*)(?:"[^"\r\n]*"|'[^'\r\n]*'|` + bareValue + `)`),
		repl: `${1}${2}***`, starts: nameStarts},
	// Query parameters whose short names are too common to match anywhere
	// else: ?key=... (WeCom robot webhooks, Google APIs), &sig=... (signed
	// URLs), ?code=... (the console's one-time sign-in link, OAuth).
	{re: anchored(`(?i)([?&;](?:key|sig|auth|code)=)` + bareValue), repl: `${1}***`, starts: queryStarts("key", "sig", "auth", "code")},
	// JSON fields, also JSON inside a JSON string: "access_token":"...",
	// \"api_key\": \"...\".
	{re: anchored(`(?i)((?:` + secretName + `|authorization)\\?"[ \t]*:[ \t]*\\?")(?:[^"\\]|\\[^"])+`), repl: `${1}***`,
		starts: append([]string{"authorization"}, nameStarts...)},
	// HTTP headers, also as Go prints an http.Header (map[X-Api-Key:[...]]).
	// Authorization only with a scheme and its credentials, or a long
	// token: not prose such as "authorization: denied for alice".
	{re: anchored(`(?i)((?:proxy-)?authorization)([ \t]*:[ \t]*\[?)(?:((?:bearer|basic|token|bot)[ \t]+)[^\s\]"',;]+|[A-Za-z0-9._~+/=\-]{12,})`),
		repl: `${1}${2}${3}***`, word: true, starts: []string{"proxy-authorization", "authorization"}},
	{re: anchored(`(?i)(x-api-key|api-key|x-goog-api-key|x-auth-token|x-subscription-token)([ \t]*:[ \t]*\[?)((?:bearer|basic|token|bot)[ \t]+)?[^\s\]"',;]+`),
		repl: `${1}${2}${3}***`, word: true,
		starts: []string{"x-api-key", "api-key", "x-goog-api-key", "x-auth-token", "x-subscription-token"}},
	// Go %+v struct dumps and YAML without a space: AccessToken:abc,
	// api_key:abc. A space after the colon (Go's "op: detail" error style,
	// "gettoken: invalid credential") is not a value.
	{re: anchored(`(?i)(` + secretName + `:)[^\s,;'"\[\]{}()<>]+`), repl: `${1}***`, starts: nameStarts},
	// Cookies, whole (the session is any of them), when what follows is
	// name=value: not prose such as "parse cookie: malformed value".
	{re: anchored(`(?i)((?:set-)?cookie[ \t]*:[ \t]*\[?)[^\s=;:\]]+=[^\r\n\]]*`), repl: `${1}***`, starts: []string{"cookie", "set-cookie"}, word: true},
	// A bearer token anywhere ("Bearer eyJhbGci...").
	{re: anchored(`(?i)(bearer[ \t]+)[A-Za-z0-9._~+/\-]{16,}=*`), repl: `${1}***`, starts: []string{"bearer"}, word: true},
	// Well-known key prefixes: OpenAI-compatible (sk-, sk-proj-, sk-ant-),
	// GitHub, Hugging Face, Tavily, Slack, Google, AWS access key ids.
	{re: anchored(`(sk-(?:proj-|ant-)?|gh[pousr]_|github_pat_|hf_|tvly-|xox[abeprs]-|AIza)[A-Za-z0-9_\-]{16,}`), repl: `${1}***`, word: true,
		starts: []string{"sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "hf_", "tvly-", "xox", "aiza"}},
	{re: anchored(`(AKIA|ASIA)[0-9A-Z]{16}\b`), repl: `${1}***`, starts: []string{"akia", "asia"}, word: true},
	// user:password@ in URLs (rare in a line: the whole-text expression
	// runs only when "://" and "@" are both there).
	{re: regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.\-]*://[^\s/:@]*):[^\s/@]+@`), repl: `${1}:***@`, words: []string{"://", "@"}},
}

// ScrubPatterns replaces the values of well-known secret shapes in v (see
// the rules above). Scrubber.Scrub applies it after the configured secrets.
func ScrubPatterns(v string) string {
	if len(v) < 6 { // the shortest match, "?key=x"
		return v
	}
	v = scrubPEM(v)
	lower := asciiLower(v)
	for i := range rules {
		if out := rules[i].apply(v, lower); out != v {
			v = out
			lower = asciiLower(v)
		}
	}
	return v
}

func (r *rule) apply(v, lower string) string {
	for _, w := range r.words {
		if !strings.Contains(lower, w) {
			return v
		}
	}
	if r.starts == nil {
		return r.re.ReplaceAllString(v, r.repl)
	}
	var out []byte
	last := 0
	// at[k]: where r.starts[k] next occurs (-1: no more), so each literal
	// is searched for once per occurrence, not once per candidate.
	at := make([]int, len(r.starts))
	for k := range at {
		at[k] = -2
	}
	for i := 0; i < len(v); {
		p := -1
		for k, s := range r.starts {
			if at[k] == -2 || at[k] >= 0 && at[k] < i {
				at[k] = -1
				if j := strings.Index(lower[i:], s); j >= 0 {
					at[k] = i + j
				}
			}
			if at[k] >= 0 && (p < 0 || at[k] < p) {
				p = at[k]
			}
		}
		if p < 0 {
			break
		}
		if r.word && p > 0 && isWordByte(v[p-1]) && isWordByte(v[p]) {
			i = p + 1
			continue
		}
		m := r.re.FindStringSubmatchIndex(v[p:])
		if m == nil || m[1] == 0 {
			i = p + 1
			continue
		}
		out = append(out, v[last:p]...)
		out = r.re.ExpandString(out, r.repl, v[p:], m)
		last = p + m[1]
		i = last
	}
	if out == nil {
		return v
	}
	return string(append(out, v[last:]...))
}

var (
	pemBegin = regexp.MustCompile(`^-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----`)
	pemEnd   = regexp.MustCompile(`^-----END [A-Z0-9 ]*PRIVATE KEY-----`)
)

// scrubPEM replaces the body of PEM private keys ("-----BEGIN RSA PRIVATE
// KEY-----***-----END RSA PRIVATE KEY-----"). Hand-written, not one
// expression: a lazy [\s\S]*? up to an END that never comes costs the rest
// of the text for every BEGIN.
func scrubPEM(v string) string {
	var out []byte
	last, i := 0, 0
	for {
		j := strings.Index(v[i:], "-----BEGIN ")
		if j < 0 {
			break
		}
		p := i + j
		m := pemBegin.FindStringSubmatchIndex(v[p:])
		if m == nil {
			i = p + 1
			continue
		}
		label := v[p+m[2] : p+m[3]]
		end := -1
		for k := p + m[1]; ; {
			e := strings.Index(v[k:], "-----END ")
			if e < 0 {
				break
			}
			if em := pemEnd.FindStringIndex(v[k+e:]); em != nil {
				end = k + e + em[1]
				break
			}
			k += e + 1
		}
		if end < 0 {
			break // no END after this BEGIN, so none after a later one
		}
		out = append(out, v[last:p]...)
		out = append(out, "-----BEGIN "+label+"PRIVATE KEY-----***-----END "+label+"PRIVATE KEY-----"...)
		last, i = end, end
	}
	if out == nil {
		return v
	}
	return string(append(out, v[last:]...))
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// asciiLower folds A-Z only (the rules' literals are ASCII), keeping byte
// offsets; it does not allocate when v has no upper-case letter.
func asciiLower(v string) string {
	i := strings.IndexFunc(v, func(r rune) bool { return r >= 'A' && r <= 'Z' })
	if i < 0 {
		return v
	}
	b := []byte(v)
	for j := i; j < len(b); j++ {
		if c := b[j]; c >= 'A' && c <= 'Z' {
			b[j] = c + 'a' - 'A'
		}
	}
	return string(b)
}
