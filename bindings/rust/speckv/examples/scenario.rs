//! The cross-language scenario (tests/bindings/cross_lang.sh), Rust's turn:
//!   scenario POOL_PATH HANDLES_FILE SEED
//! Verifies every block the previous languages listed in HANDLES_FILE, then
//! opens the pool, allocs 3 blocks with a hint, writes known bytes, prefetches,
//! reads them back, checks the stats, frees one, closes, reopens to verify,
//! and appends its blocks to HANDLES_FILE.
use speckv::{DType, ErrorKind, Handle, Hint, Pool};
use std::io::Write;

const LANG: &str = "rust";
const SIZES: [u64; 3] = [1000, 5000, 9000];

fn pattern(seed: u64, index: u64, len: u64) -> Vec<u8> {
    (0..len).map(|j| ((seed * 31 + index * 17 + j * 7 + (j >> 8)) & 0xff) as u8).collect()
}

fn fail(msg: String) -> ! {
    eprintln!("{} scenario: FAIL: {}", LANG, msg);
    std::process::exit(1);
}

fn verify(pool: &Pool, who: &str, index: u64, h: Handle, bytes: u64, seed: u64, live: bool) {
    let mut buf = vec![0u8; bytes as usize];
    match (pool.access(h, 0, &mut buf), live) {
        (Ok(()), true) => {
            if buf != pattern(seed, index, bytes) {
                fail(format!("{} block {} ({}) holds the wrong bytes", who, index, h));
            }
        }
        (Err(e), false) if e.kind() == ErrorKind::BadHandle => {}
        (r, _) => fail(format!("{} block {} ({}, live={}): unexpected {:?}", who, index, h, live, r)),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: scenario POOL_PATH HANDLES_FILE SEED");
        std::process::exit(2);
    }
    let (path, list) = (&args[1], &args[2]);
    let seed: u64 = args[3].parse().unwrap_or_else(|_| fail("SEED is not a number".into()));
    let uri = format!("file:{}?size=16M", path);
    let pool = Pool::open(&uri).unwrap_or_else(|e| fail(format!("open {}: {}", uri, e)));

    // 1. What the previous languages left.
    let prev = std::fs::read_to_string(list).unwrap_or_default();
    let mut checked = 0;
    for line in prev.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() != 6 {
            fail(format!("bad line in {}: {:?}", list, line));
        }
        let num = |s: &str| -> u64 {
            let r = if let Some(hex) = s.strip_prefix("0x") { u64::from_str_radix(hex, 16) } else { s.parse() };
            r.unwrap_or_else(|_| fail(format!("bad number {:?}", s)))
        };
        verify(&pool, f[0], num(f[1]), Handle(num(f[2])), num(f[3]), num(f[4]), f[5] == "live");
        checked += 1;
    }

    // 2. Our own blocks.
    let mut handles = Vec::new();
    for (i, &n) in SIZES.iter().enumerate() {
        let hint = Hint { tenant: 7, request: seed, layer: i as u32, token_pos: i as u64 * 16, token_count: 16, content_hash: None };
        let h = pool.alloc(n, DType::Fp16, Some(&hint)).unwrap_or_else(|e| fail(format!("alloc: {}", e)));
        pool.write(h, 0, &pattern(seed, i as u64, n)).unwrap_or_else(|e| fail(format!("write: {}", e)));
        handles.push(h);
    }
    let hint = Hint { tenant: 7, request: seed, layer: 0, token_pos: 0, token_count: 16, content_hash: None };
    pool.prefetch(&hint).unwrap_or_else(|e| fail(format!("prefetch: {}", e)));
    for (i, &h) in handles.iter().enumerate() {
        verify(&pool, LANG, i as u64, h, SIZES[i], seed, true);
    }
    let st = pool.stats().unwrap_or_else(|e| fail(format!("stats: {}", e)));
    if st.allocs != 3 || st.frees != 0 || st.prefetch_hints != 1 || st.blocks_live < 3 || st.bytes_written != 15000 {
        fail(format!("unexpected stats {:?}", st));
    }
    pool.free(handles[1]).unwrap_or_else(|e| fail(format!("free: {}", e)));
    match pool.free(handles[1]) {
        Err(e) if e.kind() == ErrorKind::BadHandle => {}
        r => fail(format!("double free gave {:?}", r)),
    }
    if pool.stats().map(|s| s.frees).unwrap_or(0) != 1 {
        fail("stats.frees is not 1".into());
    }
    pool.close().unwrap_or_else(|e| fail(format!("close: {}", e)));

    // 3. Reopen and verify.
    let pool = Pool::open(&uri).unwrap_or_else(|e| fail(format!("reopen: {}", e)));
    for (i, &h) in handles.iter().enumerate() {
        verify(&pool, LANG, i as u64, h, SIZES[i], seed, i != 1);
    }
    pool.close().unwrap_or_else(|e| fail(format!("close: {}", e)));

    let mut out = std::fs::OpenOptions::new().create(true).append(true).open(list)
        .unwrap_or_else(|e| fail(format!("{}: {}", list, e)));
    for (i, &h) in handles.iter().enumerate() {
        let state = if i == 1 { "freed" } else { "live" };
        writeln!(out, "{} {} {:#018x} {} {} {}", LANG, i, h.0, SIZES[i], seed, state)
            .unwrap_or_else(|e| fail(format!("{}: {}", list, e)));
    }
    println!("{} scenario: ok (verified {} blocks of earlier languages)", LANG, checked);
}
