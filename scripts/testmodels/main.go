// Command testmodels writes the random-weight test models the tests and
// benchmarks use: a BERT encoder shaped like bge-small-en-v1.5 with a BERT
// uncased tokenizer, and whisper tiny shaped ggml files (English-only and
// multilingual). Their output is meaningless; they exist to exercise
// loading, numerics, latency and memory. Never use them outside tests.
//
//	go run ./scripts/testmodels [DIR]   (default testdata/models)
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"agent/pkg/asr/asrtest"
	"agent/pkg/embed/embedtest"
)

func main() {
	dir := "testdata/models"
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	if err := run(dir); err != nil {
		fmt.Fprintln(os.Stderr, "testmodels:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	bge := filepath.Join(dir, "bge-small-random")
	if err := embedtest.EnsureBGESmall(bge); err != nil {
		return fmt.Errorf("bge-small: %w", err)
	}
	fmt.Println("testmodels:", bge)
	bge8 := filepath.Join(dir, "bge-small-int8-random")
	if err := embedtest.EnsureBGESmallInt8(bge8); err != nil {
		return fmt.Errorf("bge-small int8: %w", err)
	}
	fmt.Println("testmodels:", bge8)
	for _, multi := range []bool{false, true} {
		p, err := asrtest.EnsureTinyModel(dir, multi)
		if err != nil {
			return fmt.Errorf("whisper tiny: %w", err)
		}
		fmt.Println("testmodels:", p)
	}
	return nil
}
