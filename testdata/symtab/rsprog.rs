// Test target for symtab: Rust with modules, generics, a trait and a
// closure. With an argument it prints "ready" and spins.
// black_box keeps a value alive and opaque to the optimizer; written out
// (not std::hint::black_box, Rust 1.66) so the target builds with the
// Debian 12 rustc (1.63) too.
#[inline(never)]
fn black_box<T>(x: T) -> T {
    let r = unsafe { std::ptr::read_volatile(&x) };
    std::mem::forget(x);
    r
}

mod shapes {
    pub trait Area {
        fn area(&self) -> u64;
    }

    pub struct Square(pub u64);

    impl Area for Square {
        #[inline(never)]
        fn area(&self) -> u64 {
            crate::black_box(self.0 * self.0)
        }
    }

    #[inline(never)]
    pub fn total<T: Area>(items: &[T]) -> u64 {
        items.iter().map(|i| i.area()).sum()
    }
}

#[inline(never)]
fn apply<F: Fn(u64) -> u64>(f: F, x: u64) -> u64 {
    black_box(f(x))
}

fn main() {
    let n = std::env::args().count() as u64;
    let sq = [shapes::Square(n), shapes::Square(n + 1)];
    let t = shapes::total(&sq);
    let r = apply(|x| x * 3 + t, n);
    if n > 1 {
        println!("ready {}", r);
        loop {
            black_box(r);
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}
