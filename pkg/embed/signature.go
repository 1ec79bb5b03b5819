package embed

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// tensorSig is a graph input or output as the ONNX file declares it.
type tensorSig struct {
	name   string
	tensor bool    // a tensor type (not a sequence, map, ...)
	elem   int64   // TensorProto.DataType: 1 float, 7 int64
	dims   []int64 // -1 where symbolic or unknown
}

const (
	onnxFloat = 1
	onnxInt64 = 7
)

// readSignature reads a model's graph inputs and outputs straight from the
// ONNX protobuf, streaming past the weights. Asking ONNX Runtime instead
// means building a second session: the whole model loaded twice at
// startup, and ~20 MB that stays resident. Inputs that are really
// initializers (older exporters list them) are left out, as ONNX Runtime
// leaves them out of a session's inputs.
func readSignature(path string) (inputs, outputs []tensorSig, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	return parseSignature(f, st.Size())
}

// parseSignature is readSignature on a stream of size bytes.
func parseSignature(rd io.Reader, size int64) (inputs, outputs []tensorSig, err error) {
	r := &pbStream{r: bufio.NewReaderSize(rd, 64<<10), left: size}
	found := false
	for r.left > 0 {
		field, wire, err := r.key()
		if err != nil {
			return nil, nil, err
		}
		if field == 7 && wire == 2 { // ModelProto.graph
			n, err := r.varint()
			if err != nil {
				return nil, nil, err
			}
			if inputs, outputs, err = readGraph(r, int64(n)); err != nil {
				return nil, nil, err
			}
			found = true
			continue
		}
		if err := r.skip(wire); err != nil {
			return nil, nil, err
		}
	}
	if !found {
		return nil, nil, errors.New("no graph in the model")
	}
	return inputs, outputs, nil
}

func readGraph(parent *pbStream, size int64) (inputs, outputs []tensorSig, err error) {
	if size > parent.left {
		return nil, nil, io.ErrUnexpectedEOF
	}
	r := &pbStream{r: parent.r, left: size}
	parent.left -= size
	inits := map[string]bool{}
	for r.left > 0 {
		field, wire, err := r.key()
		if err != nil {
			return nil, nil, err
		}
		switch {
		case (field == 11 || field == 12) && wire == 2: // input, output
			msg, err := r.bytes(1 << 20)
			if err != nil {
				return nil, nil, err
			}
			sig, err := parseValueInfo(msg)
			if err != nil {
				return nil, nil, err
			}
			if field == 11 {
				inputs = append(inputs, sig)
			} else {
				outputs = append(outputs, sig)
			}
		case field == 5 && wire == 2: // initializer: only its name
			n, err := r.varint()
			if err != nil {
				return nil, nil, err
			}
			name, err := readTensorName(r, int64(n))
			if err != nil {
				return nil, nil, err
			}
			inits[name] = true
		default:
			if err := r.skip(wire); err != nil {
				return nil, nil, err
			}
		}
	}
	kept := inputs[:0]
	for _, in := range inputs {
		if !inits[in.name] {
			kept = append(kept, in)
		}
	}
	return kept, outputs, nil
}

func readTensorName(parent *pbStream, size int64) (string, error) {
	if size > parent.left {
		return "", io.ErrUnexpectedEOF
	}
	r := &pbStream{r: parent.r, left: size}
	parent.left -= size
	name := ""
	for r.left > 0 {
		field, wire, err := r.key()
		if err != nil {
			return "", err
		}
		if field == 8 && wire == 2 { // TensorProto.name
			b, err := r.bytes(1 << 16)
			if err != nil {
				return "", err
			}
			name = string(b)
			continue
		}
		if err := r.skip(wire); err != nil {
			return "", err
		}
	}
	return name, nil
}

// parseValueInfo decodes ValueInfoProto{name 1, type 2: TypeProto{
// tensor_type 1: {elem_type 1, shape 2: {dim 1: {dim_value 1 | dim_param 2}}}}}.
func parseValueInfo(msg []byte) (tensorSig, error) {
	var sig tensorSig
	err := walk(msg, func(field int, v uint64, b []byte) error {
		switch field {
		case 1:
			sig.name = string(b)
		case 2:
			return walk(b, func(field int, _ uint64, b []byte) error {
				if field != 1 || b == nil { // tensor_type
					return nil
				}
				sig.tensor = true
				return walk(b, func(field int, v uint64, b []byte) error {
					switch field {
					case 1:
						sig.elem = int64(v)
					case 2:
						return walk(b, func(field int, _ uint64, b []byte) error {
							if field != 1 {
								return nil
							}
							d := int64(-1)
							err := walk(b, func(field int, v uint64, _ []byte) error {
								if field == 1 {
									d = int64(v)
								}
								return nil
							})
							sig.dims = append(sig.dims, d)
							return err
						})
					}
					return nil
				})
			})
		}
		return nil
	})
	return sig, err
}

// walk calls fn for each field of an in-memory message: v for varint and
// fixed fields, b (non-nil) for length-delimited ones.
func walk(msg []byte, fn func(field int, v uint64, b []byte) error) error {
	for len(msg) > 0 {
		key, n := binary.Uvarint(msg)
		if n <= 0 {
			return errors.New("malformed protobuf")
		}
		msg = msg[n:]
		field, wire := int(key>>3), key&7
		var v uint64
		var b []byte
		switch wire {
		case 0:
			v, n = binary.Uvarint(msg)
			if n <= 0 {
				return errors.New("malformed protobuf")
			}
			msg = msg[n:]
		case 1:
			if len(msg) < 8 {
				return io.ErrUnexpectedEOF
			}
			v, msg = binary.LittleEndian.Uint64(msg), msg[8:]
		case 5:
			if len(msg) < 4 {
				return io.ErrUnexpectedEOF
			}
			v, msg = uint64(binary.LittleEndian.Uint32(msg)), msg[4:]
		case 2:
			l, n := binary.Uvarint(msg)
			if n <= 0 || l > uint64(len(msg)-n) {
				return errors.New("malformed protobuf")
			}
			b, msg = msg[n:n+int(l)], msg[n+int(l):]
			if b == nil {
				b = []byte{}
			}
		default:
			return fmt.Errorf("unsupported protobuf wire type %d", wire)
		}
		if err := fn(field, v, b); err != nil {
			return err
		}
	}
	return nil
}

// pbStream reads a length-bounded protobuf message from a stream.
type pbStream struct {
	r    *bufio.Reader
	left int64
}

func (s *pbStream) varint() (uint64, error) {
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if s.left <= 0 {
			return 0, io.ErrUnexpectedEOF
		}
		c, err := s.r.ReadByte()
		if err != nil {
			return 0, unexpected(err)
		}
		s.left--
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, nil
		}
	}
	return 0, errors.New("malformed protobuf varint")
}

func (s *pbStream) key() (field int, wire uint64, err error) {
	k, err := s.varint()
	return int(k >> 3), k & 7, err
}

func (s *pbStream) bytes(limit uint64) ([]byte, error) {
	n, err := s.varint()
	if err != nil {
		return nil, err
	}
	if n > limit || int64(n) > s.left {
		return nil, fmt.Errorf("protobuf field of %d bytes", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(s.r, b); err != nil {
		return nil, unexpected(err)
	}
	s.left -= int64(n)
	return b, nil
}

func (s *pbStream) discard(n int64) error {
	if n > s.left {
		return io.ErrUnexpectedEOF
	}
	for n > 0 {
		k := int(min(n, 1<<30))
		d, err := s.r.Discard(k)
		s.left -= int64(d)
		n -= int64(d)
		if err != nil {
			return unexpected(err)
		}
	}
	return nil
}

func (s *pbStream) skip(wire uint64) error {
	switch wire {
	case 0:
		_, err := s.varint()
		return err
	case 1:
		return s.discard(8)
	case 5:
		return s.discard(4)
	case 2:
		n, err := s.varint()
		if err != nil {
			return err
		}
		if n > uint64(s.left) {
			return io.ErrUnexpectedEOF
		}
		return s.discard(int64(n))
	}
	return fmt.Errorf("unsupported protobuf wire type %d", wire)
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func (t tensorSig) String() string {
	if !t.tensor {
		return "not a tensor"
	}
	typ := fmt.Sprintf("element type %d", t.elem)
	switch t.elem {
	case onnxFloat:
		typ = "float"
	case onnxInt64:
		typ = "int64"
	}
	return fmt.Sprintf("%s %v", typ, t.dims)
}
