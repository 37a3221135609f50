package testutil

import (
	"fmt"
	"strings"

	"go.opentelemetry.io/collector/pdata/pprofile"
)

// OTLPStacks renders the samples of an OTLP profile's dictionary and
// profile as "leaf <- ... <- root" stacks (function names, inlined ones
// first) with their summed values: the reading tests and tools compare.
func OTLPStacks(dict pprofile.ProfilesDictionary, prof pprofile.Profile) (map[string]int64, error) {
	strs := dict.StringTable()
	get := func(i int32) (string, error) {
		if i < 0 || int(i) >= strs.Len() {
			return "", fmt.Errorf("string index %d out of range", i)
		}
		return strs.At(int(i)), nil
	}
	out := map[string]int64{}
	for _, s := range prof.Samples().All() {
		si := s.StackIndex()
		if si < 0 || int(si) >= dict.StackTable().Len() {
			return nil, fmt.Errorf("stack index %d out of range", si)
		}
		var names []string
		for _, li := range dict.StackTable().At(int(si)).LocationIndices().All() {
			if li < 0 || int(li) >= dict.LocationTable().Len() {
				return nil, fmt.Errorf("location index %d out of range", li)
			}
			for _, ln := range dict.LocationTable().At(int(li)).Lines().All() {
				fi := ln.FunctionIndex()
				if fi < 0 || int(fi) >= dict.FunctionTable().Len() {
					return nil, fmt.Errorf("function index %d out of range", fi)
				}
				n, err := get(dict.FunctionTable().At(int(fi)).NameStrindex())
				if err != nil {
					return nil, err
				}
				names = append(names, n)
			}
		}
		var v int64
		for _, x := range s.Values().All() {
			v += x
		}
		out[strings.Join(names, " <- ")] += v
	}
	return out, nil
}
