package sandbox

import "encoding/binary"

// The seccomp filter every run gets (bwrap --seccomp): fallocate fails
// with EOPNOTSUPP. A preallocation reserves disk at once, gigabytes in one
// call, faster than any measurement of a run's folders can see; without
// it a program writes what it needs, which the quota and the disk reserve
// watch as it goes. Programs take EOPNOTSUPP for "this filesystem cannot"
// and write instead (glibc's posix_fallocate does so itself). io_uring
// fails with ENOSYS (its IORING_OP_FALLOCATE would reserve disk without
// the fallocate call; programs fall back to plain system calls, as on
// kernels without it). Everything else is allowed: bwrap's namespaces,
// capabilities and limits are the sandbox; this filter closes two doors.

// A syscall table: the audit architecture the kernel reports and the
// numbers of the calls refused in it.
type seccompArch struct {
	arch      uint32
	fallocate []uint32
	ioUring   []uint32 // io_uring_setup, io_uring_enter, io_uring_register
}

// seccompArches are the ABIs a process of this architecture may use:
// amd64 with its x32 numbers and the i386 compatibility ABI, arm64 with
// the 32-bit ARM one.
func seccompArches(goarch string) []seccompArch {
	uring := []uint32{425, 426, 427} // the same in every table since 5.1
	x32 := func(nrs ...uint32) []uint32 {
		for _, n := range nrs {
			nrs = append(nrs, 0x40000000|n)
		}
		return nrs
	}
	switch goarch {
	case "amd64":
		return []seccompArch{
			{0xc000003e, x32(285), x32(uring...)}, // AUDIT_ARCH_X86_64 and its x32 numbers
			{0x40000003, []uint32{324}, uring},    // AUDIT_ARCH_I386
		}
	case "arm64":
		return []seccompArch{
			{0xc00000b7, []uint32{47}, uring},  // AUDIT_ARCH_AARCH64
			{0x40000028, []uint32{352}, uring}, // AUDIT_ARCH_ARM
		}
	}
	return nil
}

// Classic BPF, as the kernel's seccomp takes it.
const (
	bpfLdWAbs  = 0x20 // BPF_LD | BPF_W | BPF_ABS
	bpfJeqK    = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
	bpfRetK    = 0x06 // BPF_RET | BPF_K
	retAllow   = 0x7fff0000
	retErrno   = 0x00050000
	eopnotsupp = 95
	enosys     = 38
	offNr      = 0 // struct seccomp_data: nr
	offArch    = 4 // arch
)

type bpfInsn struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

// seccompProgram is the filter for goarch as bytes (struct sock_filter,
// native byte order), or nil where there is no table for it (no filter:
// the per-run measurement stays the only bound).
func seccompProgram(goarch string) []byte {
	arches := seccompArches(goarch)
	if len(arches) == 0 {
		return nil
	}
	var p []bpfInsn
	var toFalloc, toUring []int // the jumps to fill in once the returns' places are known
	for _, a := range arches {
		n := len(a.fallocate) + len(a.ioUring)
		// ld arch; jeq arch, 0, skip-this-block
		p = append(p, bpfInsn{code: bpfLdWAbs, k: offArch})
		p = append(p, bpfInsn{code: bpfJeqK, k: a.arch, jf: uint8(n + 2)})
		p = append(p, bpfInsn{code: bpfLdWAbs, k: offNr})
		for _, nr := range a.fallocate {
			toFalloc = append(toFalloc, len(p))
			p = append(p, bpfInsn{code: bpfJeqK, k: nr})
		}
		for _, nr := range a.ioUring {
			toUring = append(toUring, len(p))
			p = append(p, bpfInsn{code: bpfJeqK, k: nr})
		}
		p = append(p, bpfInsn{code: bpfRetK, k: retAllow})
	}
	p = append(p, bpfInsn{code: bpfRetK, k: retAllow})
	falloc := len(p)
	p = append(p, bpfInsn{code: bpfRetK, k: retErrno | eopnotsupp})
	uring := len(p)
	p = append(p, bpfInsn{code: bpfRetK, k: retErrno | enosys})
	for _, i := range toFalloc {
		p[i].jt = uint8(falloc - i - 1)
	}
	for _, i := range toUring {
		p[i].jt = uint8(uring - i - 1)
	}
	out := make([]byte, 0, 8*len(p))
	for _, in := range p {
		out = binary.NativeEndian.AppendUint16(out, in.code)
		out = append(out, in.jt, in.jf)
		out = binary.NativeEndian.AppendUint32(out, in.k)
	}
	return out
}
