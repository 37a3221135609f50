// rustlock: "rust-waiter" blocks on a std::sync::Mutex that main holds.
// Prints "ready rust-waiter=TID" once the waiter is blocked in futex(2);
// exits on EOF on stdin.
//
// Build: rustc -O -g rustlock.rs -o rustlock
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

fn futex_tid(own: &str) -> Option<u32> {
    for e in std::fs::read_dir("/proc/self/task").ok()? {
        let name = e.ok()?.file_name().into_string().ok()?;
        if name == own {
            continue;
        }
        let sc = std::fs::read_to_string(format!("/proc/self/task/{}/syscall", name)).ok()?;
        if sc.split_whitespace().next() == Some("202") {
            return name.parse().ok();
        }
    }
    None
}

fn main() {
    let m = Arc::new(Mutex::new(0u64));
    let started = Arc::new(AtomicBool::new(false));
    let guard = m.lock().unwrap();
    let (m2, s2) = (m.clone(), started.clone());
    let _t = std::thread::Builder::new()
        .name("rust-waiter".into())
        .spawn(move || {
            s2.store(true, Ordering::SeqCst);
            let mut g = m2.lock().unwrap();
            *g += 1;
        })
        .unwrap();
    let own = std::process::id().to_string();
    while !started.load(Ordering::SeqCst) {
        std::thread::yield_now();
    }
    let tid = loop {
        if let Some(t) = futex_tid(&own) {
            break t;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    };
    println!("ready rust-waiter={}", tid);
    let mut buf = [0u8; 64];
    while let Ok(n) = std::io::stdin().read(&mut buf) {
        if n == 0 {
            break;
        }
    }
    drop(guard);
    std::process::exit(0);
}
