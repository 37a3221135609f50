//go:build stackshot_testhooks

package resolve

import (
	"fmt"
	"os"
	"strconv"
)

// Built only with -tags stackshot_testhooks (the command's tests do):
// STACKSHOT_TEST_PANIC_TID=TID makes the unwinder panic for that thread, to
// show that one thread's failure does not end a dump.
func init() {
	if tid, err := strconv.Atoi(os.Getenv("STACKSHOT_TEST_PANIC_TID")); err == nil && tid > 0 {
		unwindHook = func(t int) {
			if t == tid {
				panic(fmt.Sprintf("test hook: unwinder panic in thread %d", t))
			}
		}
	}
}
