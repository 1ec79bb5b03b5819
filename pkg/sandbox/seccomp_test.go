package sandbox

import (
	"encoding/binary"
	"testing"
)

// The filter, run by a small interpreter of the instructions it uses,
// refuses fallocate and io_uring in every ABI of the architecture and lets
// the rest through (including fallocate's number in another ABI, where it
// is another call).
func TestSeccompProgramRefusesFallocateAndIOUringOnly(t *testing.T) {
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
		for _, a := range arches {
			for _, c := range []struct {
				nrs  []uint32
				want uint32
			}{{a.fallocate, retErrno | eopnotsupp}, {a.ioUring, retErrno | enosys}} {
				for _, nr := range c.nrs {
					if got := run(a.arch, nr); got != c.want {
						t.Errorf("%s arch %#x nr %d: %#x, want %#x", goarch, a.arch, nr, got, c.want)
					}
				}
			}
			for _, nr := range []uint32{0, 1, 2, 59, 231, a.fallocate[0] - 1, a.fallocate[0] + 1, 424, 428} {
				if got := run(a.arch, nr); got != retAllow {
					t.Errorf("%s arch %#x nr %d: %#x, want allow", goarch, a.arch, nr, got)
				}
			}
		}
		// fallocate's number in one ABI is another call in the other.
		if got := run(arches[1].arch, arches[0].fallocate[0]); got != retAllow {
			t.Errorf("%s: nr %d refused in arch %#x", goarch, arches[0].fallocate[0], arches[1].arch)
		}
		if got := run(0x12345678, arches[0].fallocate[0]); got != retAllow {
			t.Errorf("%s: an unknown arch: %#x", goarch, got)
		}
	}
	if seccompProgram("riscv64") != nil {
		t.Error("a filter for an architecture without a table")
	}
}
