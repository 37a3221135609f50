//go:build linux

package symtab

import "golang.org/x/sys/unix"

// sparseBuffer returns n zero bytes of which only those written take
// memory (an anonymous mapping), and the function that unmaps them; nil
// if it cannot.
func sparseBuffer(n int) ([]byte, func()) {
	if n <= 0 {
		return nil, nil
	}
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, nil
	}
	return b, func() { unix.Munmap(b) }
}
