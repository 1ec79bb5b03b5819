// Package llm is a client for OpenAI-compatible chat-completions endpoints
// (OpenAI, DeepSeek, DashScope, Ollama, vLLM and any other server speaking
// the same wire format), with tools, streaming, retries and a circuit
// breaker.
//
// Provider differences live in one table (presets): Ollama never gets
// tool_choice; DeepSeek gets reasoning_content back on assistant messages
// (its thinking mode with tools answers 400 otherwise) while OpenAI, which
// rejects unknown fields, never does; stream_options.include_usage is asked
// for where it is understood.
//
// Streams are assembled the forgiving way: tool-call fragments are keyed by
// their index, a known id is never replaced by an empty one (DashScope sends
// "id":"" in later fragments), whole calls in one chunk (Ollama) work, and
// reasoning is read from reasoning_content or reasoning.
//
// Every failure is an *APIError wrapping one sentinel error that says what
// to do about it (ErrRateLimited, ErrServer, ErrUnavailable, ErrBadRequest,
// ErrAuth, ErrContentFilter, ErrMalformed). 429, 5xx and network failures
// are retried with jittered exponential backoff, honouring Retry-After,
// within a bounded number of attempts and total time; consecutive 5xx and
// network failures open a circuit breaker for a cool-down, after which one
// probe is let through. The clock (pkg/clock), jitter and the HTTP client
// are injected through Config, so tests never sleep.
package llm
