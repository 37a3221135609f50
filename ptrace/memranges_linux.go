//go:build linux

package ptrace

import "golang.org/x/sys/unix"

// ReadRanges reads many ranges of the target's memory, bufs[i] at
// addrs[i], in as few process_vm_readv calls as the kernel allows (1024
// iovecs each); ok[i] says whether bufs[i] was read whole. The kernel
// stops a call at the first range it cannot read: that range is read
// again alone, page by page, and the call goes on after it.
func (m MemReader) ReadRanges(bufs [][]byte, addrs []uint64) []bool {
	const maxIov = 1024
	ok := make([]bool, len(bufs))
	var local [maxIov]unix.Iovec
	var remote [maxIov]unix.RemoteIovec
	var idx [maxIov]int
	i := 0
	for i < len(bufs) {
		n := 0
		j := i
		for ; j < len(bufs) && n < maxIov; j++ {
			if len(bufs[j]) == 0 {
				ok[j] = true
				continue
			}
			local[n] = unix.Iovec{Base: &bufs[j][0]}
			local[n].SetLen(len(bufs[j]))
			remote[n] = unix.RemoteIovec{Base: uintptr(addrs[j]), Len: len(bufs[j])}
			idx[n] = j
			n++
		}
		if n == 0 {
			break
		}
		got, _ := unix.ProcessVMReadv(m.PID, local[:n], remote[:n], 0)
		k := 0
		for ; k < n && got >= len(bufs[idx[k]]); k++ {
			ok[idx[k]] = true
			got -= len(bufs[idx[k]])
		}
		if k == n {
			i = j
			continue
		}
		// Range idx[k] failed (or was cut short): alone, page by page.
		b := bufs[idx[k]]
		ok[idx[k]] = ReadMemory(m.PID, b, addrs[idx[k]]) == len(b)
		i = idx[k] + 1
	}
	return ok
}
