package testutil

// Patched is seed with patch written at off (modulo its length; past its
// end, longer), in work's memory: the input of the fuzz targets that
// mutate a small patch over a whole seed image, as a whole image taken as
// the fuzzer's input leaves it minimising for most of its time.
func Patched(work, seed []byte, off uint32, patch []byte) []byte {
	work = append(work[:0], seed...)
	if len(work) == 0 {
		return append(work, patch...)
	}
	at := int(off % uint32(len(work)))
	n := copy(work[at:], patch)
	return append(work, patch[n:]...)
}
