//go:build whisper && cuda

package asr

/*
// A whisper.cpp built with GGML_CUDA (scripts/deps.sh whisper-cuda;
// `make build-cuda` sets the flags) adds ggml's CUDA backend, which needs
// CUDA's runtime and cuBLAS (JetPack: /usr/local/cuda/lib64, the driver in
// /usr/lib/aarch64-linux-gnu/tegra). ggml-cuda comes after the libraries
// whisper.go names and needs ggml-base and the C++ library after it.
#cgo LDFLAGS: -lggml-cuda -lggml-base -lcudart -lcublas -lcublasLt -lcuda -lstdc++ -ldl -lrt
*/
import "C"
