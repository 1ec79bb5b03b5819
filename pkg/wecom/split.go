package wecom

import "agent/pkg/textsplit"

// MaxTextBytes is WeCom's limit on a text or markdown message, in bytes.
const MaxTextBytes = 2048

// Split cuts text into chunks of at most maxBytes bytes (textsplit.Split;
// MaxTextBytes for a WeCom text message).
func Split(text string, maxBytes int) []string { return textsplit.Split(text, maxBytes) }
