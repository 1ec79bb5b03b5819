//go:build cgo

package onnxrt

// AddRunConfig lets the external tests reach addRunConfig.
var AddRunConfig = addRunConfig
