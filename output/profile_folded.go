package output

import (
	"bufio"
	"io"
	"strconv"
)

// WriteFolded writes p as collapsed stacks (the format of Brendan Gregg's
// stackcollapse scripts, read by flamegraph.pl and speedscope): one line per
// unique stack, frames root first joined by ';', a space, and the count.
//
// The root frame is the process's comm, then with PerThread the thread name
// (e.g. "myserver;worker-1;main;serve;hot_a 42"). Frames are named by
// frameName: function names, inlined functions as their own frames, kernel
// functions with a "_[k]" suffix, unknown functions as "module+0xoffset".
// Names never contain ';' or newlines (replaced). Stacks with the same text
// are merged by summing their counts, and lines are sorted by text.
func WriteFolded(w io.Writer, p *Profile) error {
	bw := bufio.NewWriter(w)
	var num []byte
	for _, st := range foldStacks(p) {
		bw.WriteString(st.text)
		bw.WriteByte(' ')
		num = strconv.AppendInt(num[:0], st.count, 10)
		bw.Write(num)
		bw.WriteByte('\n')
	}
	return bw.Flush()
}
