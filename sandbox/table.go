//go:build linux

package sandbox

import "fmt"

// Frames that carry many alike things (the kernel stacks of a pool's
// threads, the locks they wait on, goroutines parked at the same place)
// carry each distinct one once, in a table, and each item's index in it
// (-1: none).

// tabulate returns the distinct values of items, by key (ok false: the
// item is none), and each item's index among them.
func tabulate[T any, K comparable](items []T, key func(T) (k K, ok bool)) (tab []T, of []int) {
	of = make([]int, len(items))
	index := map[K]int{}
	for i, it := range items {
		k, ok := key(it)
		if !ok {
			of[i] = -1
			continue
		}
		j, seen := index[k]
		if !seen {
			j = len(tab)
			index[k] = j
			tab = append(tab, it)
		}
		of[i] = j
	}
	return tab, of
}

// untabulate gives each of n items (what they are, for the error) its
// value from tab by its index in of (tabulate), through set; an item of
// none is left as it is. Indexes that do not fit are an error, before
// any set.
func untabulate[T any](tab []T, of []int, n int, what string, set func(i int, v T)) error {
	if len(of) != n {
		return fmt.Errorf("table indexes for %d of %d %ss", len(of), n, what)
	}
	for i, j := range of {
		if j < -1 || j >= len(tab) {
			return fmt.Errorf("%s %d: entry %d of %d", what, i, j, len(tab))
		}
	}
	for i, j := range of {
		if j >= 0 {
			set(i, tab[j])
		}
	}
	return nil
}
