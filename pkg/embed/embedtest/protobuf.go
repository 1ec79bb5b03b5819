package embedtest

import (
	"encoding/binary"
	"math"
)

// A hand-rolled encoder for the protobuf wire format, just big enough for
// the ONNX messages WriteModel emits. Field numbers are those of onnx.proto
// (onnx/onnx, proto2); repeated scalars are written unpacked, as proto2
// does by default, which every protobuf decoder accepts.

const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

// ONNX field numbers.
const (
	// ModelProto
	modelIRVersion    = 1
	modelProducerName = 2
	modelGraph        = 7
	modelOpsetImport  = 8
	// OperatorSetIdProto
	opsetDomain  = 1
	opsetVersion = 2
	// GraphProto
	graphNode        = 1
	graphName        = 2
	graphInitializer = 5
	graphInput       = 11
	graphOutput      = 12
	// NodeProto
	nodeInput     = 1
	nodeOutput    = 2
	nodeName      = 3
	nodeOpType    = 4
	nodeAttribute = 5
	// AttributeProto
	attrName = 1
	attrF    = 2
	attrI    = 3
	attrInts = 8
	attrType = 20
	// TensorProto
	tensorDims     = 1
	tensorDataType = 2
	tensorName     = 8
	tensorRawData  = 9
	// ValueInfoProto
	valueInfoName = 1
	valueInfoType = 2
	// TypeProto / TypeProto.Tensor
	typeTensorType   = 1
	tensorTypeElem   = 1
	tensorTypeShape  = 2
	shapeDim         = 1
	dimValue         = 1
	dimParam         = 2
	attrTypeFloat    = 1
	attrTypeInt      = 2
	attrTypeInts     = 7
	dataTypeFloat    = 1
	dataTypeInt8     = 3
	dataTypeInt64    = 7
	onnxIRVersion    = 8
	onnxOpsetVersion = 17
)

// pb is a protobuf message under construction.
type pb []byte

func (b pb) varint(v uint64) pb { return binary.AppendUvarint(b, v) }

func (b pb) tag(field, wire int) pb { return b.varint(uint64(field)<<3 | uint64(wire)) }

// int64f writes an int64/int32/enum field (negative values take ten bytes,
// as protobuf specifies for int64).
func (b pb) int64f(field int, v int64) pb { return b.tag(field, wireVarint).varint(uint64(v)) }

func (b pb) bytesf(field int, data []byte) pb {
	return append(b.tag(field, wireBytes).varint(uint64(len(data))), data...)
}

func (b pb) stringf(field int, s string) pb {
	return append(b.tag(field, wireBytes).varint(uint64(len(s))), s...)
}

func (b pb) float32f(field int, v float32) pb {
	return binary.LittleEndian.AppendUint32(b.tag(field, wireFixed32), math.Float32bits(v))
}

// varintLen is the encoded size of v.
func varintLen(v uint64) int64 {
	n := int64(1)
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// bytesFieldLen is the encoded size of a length-delimited field whose
// payload is n bytes long.
func bytesFieldLen(field int, n int64) int64 {
	return varintLen(uint64(field)<<3|wireBytes) + varintLen(uint64(n)) + n
}
