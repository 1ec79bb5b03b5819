package sandbox

import "encoding/binary"

// The seccomp filter every run gets (bwrap --seccomp): fallocate fails
// with EOPNOTSUPP. A preallocation reserves disk at once, gigabytes in one
// call, faster than any measurement of a run's folders can see; without
// it a program writes what it needs, which the quota and the disk reserve
// watch as it goes. Programs take EOPNOTSUPP for "this filesystem cannot"
// and write instead (glibc's posix_fallocate does so itself). Everything
// else is allowed: bwrap's namespaces, capabilities and limits are the
// sandbox; this filter closes one door only.

// A syscall table: the audit architecture the kernel reports and the
// numbers of fallocate in it.
type seccompArch struct {
	arch uint32
	nrs  []uint32
}

// seccompArches are the ABIs a process of this architecture may use:
// amd64 with its x32 numbers and the i386 compatibility ABI, arm64 with
// the 32-bit ARM one.
func seccompArches(goarch string) []seccompArch {
	switch goarch {
	case "amd64":
		return []seccompArch{
			{0xc000003e, []uint32{285, 0x40000000 | 285}}, // AUDIT_ARCH_X86_64: fallocate, x32 fallocate
			{0x40000003, []uint32{324}},                   // AUDIT_ARCH_I386
		}
	case "arm64":
		return []seccompArch{
			{0xc00000b7, []uint32{47}},  // AUDIT_ARCH_AARCH64
			{0x40000028, []uint32{352}}, // AUDIT_ARCH_ARM
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
	var denies []int // the jumps to fill in once the deny's place is known
	for _, a := range arches {
		// ld arch; jeq arch, 0, skip-this-block
		p = append(p, bpfInsn{code: bpfLdWAbs, k: offArch})
		p = append(p, bpfInsn{code: bpfJeqK, k: a.arch, jf: uint8(len(a.nrs) + 2)})
		p = append(p, bpfInsn{code: bpfLdWAbs, k: offNr})
		for _, nr := range a.nrs {
			denies = append(denies, len(p))
			p = append(p, bpfInsn{code: bpfJeqK, k: nr})
		}
		p = append(p, bpfInsn{code: bpfRetK, k: retAllow})
	}
	p = append(p, bpfInsn{code: bpfRetK, k: retAllow})
	deny := len(p)
	p = append(p, bpfInsn{code: bpfRetK, k: retErrno | eopnotsupp})
	for _, i := range denies {
		p[i].jt = uint8(deny - i - 1)
	}
	out := make([]byte, 0, 8*len(p))
	for _, in := range p {
		out = binary.NativeEndian.AppendUint16(out, in.code)
		out = append(out, in.jt, in.jf)
		out = binary.NativeEndian.AppendUint32(out, in.k)
	}
	return out
}
