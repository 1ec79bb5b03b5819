// Package offline holds the whole-system proofs that the daemon's local
// parts work without a network: tests that run the real code (ONNX
// embeddings, whisper.cpp speech recognition, the Silero VAD, memory on
// SQLite) in a child process and watch, from outside, every socket it
// opens. The package has no code of its own; see nosocket_test.go.
package offline
