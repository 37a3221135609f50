package symtab

import "testing"

func TestDemangleRustLegacy(t *testing.T) {
	for in, want := range map[string]string{
		// Expected values as rustc-demangle (and binutils' nm -C) give them.
		"_ZN3std3sys9backtrace28__rust_begin_short_backtrace17h697e5483e2353136E":                                                 "std::sys::backtrace::__rust_begin_short_backtrace",
		"_ZN4core3ptr85drop_in_place$LT$std..rt..lang_start$LT$$LP$$RP$$GT$..$u7b$$u7b$closure$u7d$$u7d$$GT$17h0123456789abcdefE": "core::ptr::drop_in_place<std::rt::lang_start<()>::{{closure}}>",
		"_ZN71_$LT$Test$u20$$u2b$$u20$$u27$static$u20$as$u20$foo..Bar$LT$Test$GT$$GT$3bar17h930b740aa94f1d3aE":                    "<Test + 'static as foo::Bar<Test>>::bar",
		"_ZN5alloc2rc11Rc$LT$T$GT$4drop17h0000000000000000E":                                                                      "alloc::rc::Rc<T>::drop",
	} {
		if got := Demangle(in); got != want {
			t.Errorf("Demangle(%s)\n got %s\nwant %s", in, got, want)
		}
	}
	// Not Rust legacy: C++ and malformed names go to the general path.
	for _, in := range []string{"_ZN3foo3barEv", "_ZN3foo17h0123456789abcdeE", "_ZN999fooE"} {
		if _, ok := demangleRustLegacy(in); ok {
			t.Errorf("demangleRustLegacy(%s) accepted a non-Rust name", in)
		}
	}
}
