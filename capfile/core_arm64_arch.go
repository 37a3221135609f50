package capfile

import (
	"debug/elf"
	"encoding/binary"

	"stackshot/internal/arch"
)

// The aarch64 Linux layouts of a core's thread notes (linux/elfcore.h,
// asm/ptrace.h): struct elf_prstatus has the same header as x86-64's,
// then pr_reg (user_pt_regs, 34 words), fpvalid (4, 4 pad);
// elf_prpsinfo is laid out as on x86-64.
const prstatusSizeARM64 = 392

// ntARMPACMask is NT_ARM_PAC_MASK: {data_mask, insn_mask}, the bits of a
// pointer that pointer authentication uses.
const ntARMPACMask = 0x406

// coreArch is what reading a core's threads depends on.
type coreArch struct {
	name         string // arch.AMD64 or arch.ARM64
	prstatusSize int
	regs         int // words of pr_reg
	sp           int // the stack pointer's index in pr_reg
}

var coreArches = map[elf.Machine]coreArch{
	elf.EM_X86_64:  {name: arch.AMD64, prstatusSize: prstatusSize, regs: arch.UserRegsCount, sp: arch.UserRSP},
	elf.EM_AARCH64: {name: arch.ARM64, prstatusSize: prstatusSizeARM64, regs: arch.ARM64UserRegsCount, sp: arch.ARM64UserSP},
}

// regsOf reads pr_reg of an NT_PRSTATUS.
func (a coreArch) regsOf(b []byte) []uint64 {
	r := make([]uint64, a.regs)
	for i := range r {
		r[i] = binary.LittleEndian.Uint64(b[prstatusReg+8*i:])
	}
	return r
}
