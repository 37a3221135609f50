//go:build !linux

package procmaps

func readFile(path string, buf []byte) ([]byte, error) { return readSmallOS(path) }
