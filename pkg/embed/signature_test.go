package embed

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestReadSignatureMatchesRuntime(t *testing.T) {
	path := filepath.Join(fixtureDir(t), ModelFile)
	ins, outs, err := readSignature(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(ins, outs); got != "[int64 [-1 -1] int64 [-1 -1] int64 [-1 -1]] [float [-1 -1 32]]" {
		t.Errorf("signature %s", got)
	}
	if ins[0].name != "input_ids" || ins[2].name != "token_type_ids" || outs[0].name != "last_hidden_state" {
		t.Errorf("names %v %v", ins, outs)
	}
	needRuntime(t)
	oins, oouts, err := ortSignature(path)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v %+v", ins, outs) != fmt.Sprintf("%+v %+v", oins, oouts) {
		t.Errorf("readSignature %+v %+v\nONNX Runtime  %+v %+v", ins, outs, oins, oouts)
	}
}

// A graph that lists an initializer among its inputs (as exporters did
// before IR 4) and has a non-tensor output.
func TestReadSignatureEdgeCases(t *testing.T) {
	varint := func(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }
	field := func(b []byte, num int, payload []byte) []byte {
		return append(varint(varint(b, uint64(num)<<3|2), uint64(len(payload))), payload...)
	}
	vi := func(name string, elem uint64, dims ...uint64) []byte {
		var shape []byte
		for _, d := range dims {
			shape = field(shape, 1, varint(varint(nil, 1<<3), d))
		}
		tensor := append(varint(varint(nil, 1<<3), elem), field(nil, 2, shape)...)
		typ := field(nil, 1, tensor)
		return field(field(nil, 1, []byte(name)), 2, typ)
	}
	var g []byte
	g = field(g, 11, vi("input_ids", onnxInt64, 1, 8))
	g = field(g, 11, vi("weight", onnxFloat, 4))
	g = field(g, 5, field(field(nil, 8, []byte("weight")), 9, make([]byte, 16)))
	g = field(g, 12, field(field(nil, 1, []byte("seq")), 2, field(nil, 4, []byte{}))) // sequence_type
	model := field(varint(varint(nil, 1<<3), 8), 7, g)
	p := filepath.Join(t.TempDir(), "m.onnx")
	if err := os.WriteFile(p, model, 0o644); err != nil {
		t.Fatal(err)
	}
	ins, outs, err := readSignature(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(ins) != 1 || ins[0].name != "input_ids" || fmt.Sprint(ins[0].dims) != "[1 8]" {
		t.Errorf("inputs %+v", ins)
	}
	if len(outs) != 1 || outs[0].tensor {
		t.Errorf("outputs %+v", outs)
	}
	for _, bad := range [][]byte{{}, model[:len(model)/2], {0x3a, 0xff, 0xff, 0xff, 0xff, 0x0f}} {
		if err := os.WriteFile(p, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, err := readSignature(p); err == nil {
			t.Errorf("readSignature(% x...) succeeded", bad[:min(len(bad), 8)])
		}
	}
}

// FuzzReadSignature: arbitrary bytes as a model file never panic.
func FuzzReadSignature(f *testing.F) {
	model, err := os.ReadFile(filepath.Join(fixtureDir(f), ModelFile))
	if err != nil {
		f.Fatal(err)
	}
	// The head of the real model (nodes, first initializer) and its tail
	// (inputs, outputs, opset) make good seeds.
	f.Add(model[:4096])
	f.Add(model[len(model)-1024:])
	f.Add([]byte{0x3a, 0x05, 0x5a, 0x03, 0x0a, 0x01, 0x78})
	f.Fuzz(func(t *testing.T, data []byte) {
		parseSignature(bytes.NewReader(data), int64(len(data)))
	})
}
