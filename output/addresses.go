package output

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"stackshot/internal/term"
	"stackshot/report"
)

// Address is one address that `symbolize` was asked about.
type Address struct {
	Text   string // as given
	Addr   uint64
	OK     bool           // Text is a hexadecimal address
	Frames []report.Frame // logical frames, innermost (inlined) first; none when unknown
}

// Addr2line writes a as addr2line does: with showAddr the address, then
// "function" and "file:line" per frame, "??" for what is unknown.
func Addr2line(w io.Writer, a Address, showAddr bool) {
	if showAddr {
		fmt.Fprintf(w, "0x%016x\n", a.Addr)
	}
	if len(a.Frames) == 0 {
		fmt.Fprintf(w, "??\n??:0\n")
	}
	for _, f := range a.Frames {
		fmt.Fprintf(w, "%s\n%s:%d\n", term.Escape(orUnknown(f.Function)), term.Escape(orUnknown(f.File)), f.Line)
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "??"
	}
	return s
}

// The JSON of `symbolize --json`: an array with one object per address,
// in the order given:
//
//	[{"address": "0x401136",
//	  "frames": [{"function": "leaf", "file": "/src/a.c", "line": 12, "inlined": true},
//	             {"function": "main", "file": "/src/a.c", "line": 30, "inlined": false}]},
//	 {"address": "zz", "error": "not a hexadecimal address", "frames": []}]
//
// frames are innermost first: an inlined function, then the function it
// was inlined into; empty when nothing is known of the address. function
// and file are null when unknown, line 0.
type jsonAddress struct {
	Address string        `json:"address"`
	Error   string        `json:"error,omitempty"`
	Frames  []jsonAddrFrm `json:"frames"`
}

type jsonAddrFrm struct {
	Function *string `json:"function"`
	File     *string `json:"file"`
	Line     int     `json:"line"`
	Inlined  bool    `json:"inlined"`
}

// AddressesJSON writes addrs as documented above.
func AddressesJSON(w io.Writer, addrs []Address) error {
	out := make([]jsonAddress, 0, len(addrs))
	for _, a := range addrs {
		ja := jsonAddress{Address: hex(a.Addr), Frames: []jsonAddrFrm{}}
		if !a.OK {
			ja.Address, ja.Error = a.Text, "not a hexadecimal address"
		}
		for _, f := range a.Frames {
			jf := jsonAddrFrm{Line: f.Line, Inlined: f.Inlined}
			if f.Function != "" {
				jf.Function = &f.Function
			}
			if f.File != "" {
				jf.File = &f.File
			}
			ja.Frames = append(ja.Frames, jf)
		}
		out = append(out, ja)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// parseAddr reads an address as symbolize takes it: hexadecimal, with or
// without 0x.
func parseAddr(word string) (uint64, bool) {
	v, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimPrefix(word, "0x"), "0X"), 16, 64)
	return v, err == nil
}

// aheadReader reads in for the line scanner and hands prefetch the
// addresses of the complete lines of each read, before the scanner gives
// them out to be answered: what is already read is decoded ahead on the
// idle cores, and nothing waits for input that has not come.
type aheadReader struct {
	r        io.Reader
	prefetch func([]uint64)
	partial  []byte // the incomplete last line of the reads so far
	addrs    []uint64
}

func (a *aheadReader) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if n > 0 {
		a.scan(p[:n])
	}
	return n, err
}

func (a *aheadReader) scan(b []byte) {
	last := bytes.LastIndexByte(b, '\n')
	if last < 0 {
		if len(a.partial)+len(b) <= bufio.MaxScanTokenSize { // a hint only: a longer line goes without
			a.partial = append(a.partial, b...)
		}
		return
	}
	a.addrs = a.addrs[:0]
	word := func(w []byte) {
		if v, ok := parseAddr(string(w)); ok {
			a.addrs = append(a.addrs, v)
		}
	}
	first := bytes.IndexByte(b, '\n')
	if len(a.partial) > 0 {
		for _, w := range bytes.Fields(append(a.partial, b[:first]...)) {
			word(w)
		}
		a.partial = a.partial[:0]
	} else {
		for _, w := range bytes.Fields(b[:first]) {
			word(w)
		}
	}
	for _, w := range bytes.Fields(b[first:last]) {
		word(w)
	}
	if rest := b[last+1:]; len(rest) <= bufio.MaxScanTokenSize {
		a.partial = append(a.partial, rest...)
	}
	if len(a.addrs) > 0 {
		a.prefetch(a.addrs)
	}
}

// Symbolize answers as addr2line does: it names each hexadecimal address
// of words (or, when there are none, of the lines read from in, each line
// answered as it comes) with lookup, and writes the answers to w, as text
// or, with jsonOut, as one JSON array at the end. prefetch (nil: none) is
// told the addresses about to be looked up (the words, or the lines read
// but not yet answered).
func Symbolize(w *bufio.Writer, words []string, in io.Reader, lookup func(uint64) []report.Frame, prefetch func([]uint64), jsonOut, showAddr bool) error {
	var all []Address
	if prefetch != nil {
		if len(words) > 0 {
			var addrs []uint64
			for _, word := range words {
				if v, ok := parseAddr(strings.TrimSpace(word)); ok {
					addrs = append(addrs, v)
				}
			}
			prefetch(addrs)
		} else {
			in = &aheadReader{r: in, prefetch: prefetch}
		}
	}
	one := func(word string) {
		a := Address{Text: word}
		v, ok := parseAddr(word)
		if a.Addr, a.OK = v, ok; a.OK {
			a.Frames = lookup(v)
		}
		if jsonOut {
			all = append(all, a) // one array, written at the end
		} else {
			Addr2line(w, a, showAddr)
		}
	}
	for _, a := range words {
		one(strings.TrimSpace(a))
	}
	if len(words) == 0 {
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			for _, word := range strings.Fields(sc.Text()) {
				one(word)
			}
			w.Flush() // answer each line as it comes, as addr2line does
		}
	}
	if jsonOut {
		return AddressesJSON(w, all)
	}
	return nil
}
