// Real-world test target: Rust threads blocked in a channel recv, a sleep,
// and a sleep reached from a Drop run while a panic unwinds; main blocked
// reading stdin. Prints "ready" when in place.
// Built by cmd/stackshot's realworld tests: rustc -O -g threads.rs
use std::io::BufRead;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

// black_box keeps a value alive and opaque to the optimizer; written out
// (not std::hint::black_box, Rust 1.66) so the target builds with the
// Debian 12 rustc (1.63) too.
#[inline(never)]
fn black_box<T>(x: T) -> T {
    let r = unsafe { std::ptr::read_volatile(&x) };
    std::mem::forget(x);
    r
}

#[inline(never)]
fn recv_b(rx: &mpsc::Receiver<u32>) -> u32 {
    rx.recv().unwrap_or(0)
}
#[inline(never)]
fn recv_a(rx: mpsc::Receiver<u32>) -> u32 {
    let r = recv_b(&rx);
    black_box(r)
}
#[inline(never)]
fn sleep_b() {
    thread::sleep(Duration::from_secs(100000));
    black_box(());
}
#[inline(never)]
fn sleep_a() {
    sleep_b();
    black_box(());
}

struct Guard;
impl Drop for Guard {
    #[inline(never)]
    fn drop(&mut self) {
        sleep_b();
        black_box(());
    }
}
#[inline(never)]
fn panicker() {
    let _g = Guard;
    panic!("unwinding on purpose");
}

#[inline(never)]
fn main_wait() {
    let mut s = String::new();
    let _ = std::io::stdin().lock().read_line(&mut s);
    black_box(&s);
}

fn main() {
    std::panic::set_hook(Box::new(|_| {}));
    let (tx, rx) = mpsc::channel::<u32>();
    thread::Builder::new().name("receiver".into()).spawn(move || recv_a(rx)).unwrap();
    thread::Builder::new().name("sleeper".into()).spawn(sleep_a).unwrap();
    thread::Builder::new().name("panicker".into()).spawn(panicker).unwrap();
    thread::sleep(Duration::from_millis(100));
    println!("ready");
    main_wait();
    drop(tx);
}
