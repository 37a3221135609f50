//go:build !linux

package symtab

// sparseBuffer returns n zero bytes (see the Linux version).
func sparseBuffer(n int) ([]byte, func()) {
	if n <= 0 {
		return nil, nil
	}
	return make([]byte, n), func() {}
}
