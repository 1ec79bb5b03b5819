package sandbox

import (
	"encoding/binary"
	"testing"
)

// The filter, run by a small interpreter of the instructions it uses,
// refuses fallocate in every ABI of the architecture and lets the rest
// through (including fallocate's number in another ABI, where it is
// another call).
func TestSeccompProgramRefusesFallocateOnly(t *testing.T) {
	for _, goarch := range []string{"amd64", "arm64"} {
		prog := seccompProgram(goarch)
		if len(prog)%8 != 0 || len(prog) == 0 {
			t.Fatalf("%s: %d bytes", goarch, len(prog))
		}
		run := func(arch, nr uint32) uint32 {
			var acc uint32
			for pc := 0; pc < len(prog)/8; pc++ {
				in := prog[pc*8:]
				code, jt, jf, k := binary.NativeEndian.Uint16(in), in[2], in[3], binary.NativeEndian.Uint32(in[4:])
				switch code {
				case bpfLdWAbs:
					acc = map[uint32]uint32{offNr: nr, offArch: arch}[k]
				case bpfJeqK:
					if acc == k {
						pc += int(jt)
					} else {
						pc += int(jf)
					}
				case bpfRetK:
					return k
				default:
					t.Fatalf("%s: unknown instruction %#x", goarch, code)
				}
			}
			t.Fatalf("%s: fell off the end", goarch)
			return 0
		}
		arches := seccompArches(goarch)
		for i, a := range arches {
			for _, nr := range a.nrs {
				if got := run(a.arch, nr); got != retErrno|eopnotsupp {
					t.Errorf("%s arch %#x nr %d: %#x, want EOPNOTSUPP", goarch, a.arch, nr, got)
				}
			}
			for _, nr := range []uint32{0, 1, 2, 59, 231, a.nrs[0] - 1, a.nrs[0] + 1} {
				if got := run(a.arch, nr); got != retAllow {
					t.Errorf("%s arch %#x nr %d: %#x, want allow", goarch, a.arch, nr, got)
				}
			}
			other := arches[(i+1)%len(arches)]
			if got := run(other.arch, a.nrs[0]); got != retAllow && !contains(other.nrs, a.nrs[0]) {
				t.Errorf("%s: nr %d of arch %#x refused in arch %#x", goarch, a.nrs[0], a.arch, other.arch)
			}
		}
		if got := run(0x12345678, arches[0].nrs[0]); got != retAllow {
			t.Errorf("%s: an unknown arch: %#x", goarch, got)
		}
	}
	if seccompProgram("riscv64") != nil {
		t.Error("a filter for an architecture without a table")
	}
}

func contains(s []uint32, v uint32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
