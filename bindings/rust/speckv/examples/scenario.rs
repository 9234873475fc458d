// SPDX-License-Identifier: Apache-2.0
//! The cross-language scenario (tests/bindings/cross_lang.sh), Rust's turn:
//!   scenario POOL_PATH HANDLES_FILE SEED SHARED_FILE
//! Verifies every block the previous languages listed in HANDLES_FILE, then
//! opens the pool, allocs 3 blocks with a hint, writes known bytes, prefetches,
//! reads them back, checks the stats, frees one, closes, reopens to verify,
//! and appends its blocks to HANDLES_FILE. Then the sharing part (as in
//! scenario.c): prints the chained block hashes ("hash ALGO EXTRA BLOCK HEX"),
//! looks up every block earlier languages published (SHARED_FILE), publishes
//! its own, and appends it to SHARED_FILE.
use speckv::{block_hash, BlockHash, DType, ErrorKind, Handle, HashAlgo, Hint, Pool, Published};
use std::io::Write;

const LANG: &str = "rust";
const SIZES: [u64; 3] = [1000, 5000, 9000];

fn pattern(seed: u64, index: u64, len: u64) -> Vec<u8> {
    (0..len).map(|j| ((seed * 31 + index * 17 + j * 7 + (j >> 8)) & 0xff) as u8).collect()
}

// ------------------------------------------------- the sharing part's inputs
// The same in every language: 64 tokens, the last 8 chosen to hit every CBOR
// integer width; 4 blocks of 16; two extras.
const TENANT: u64 = 7;
const WIDE: [u32; 8] = [0, 23, 24, 255, 256, 65535, 65536, 4294967295];
const EXTRA_NATIVE: &[u8] = b"speckv-test-model";
const EXTRA_CBOR: &[u8] = &[0x82, 0x66, b'l', b'o', b'r', b'a', b'-', b'7', 0x03]; // ["lora-7", 3]
const SHARED_BYTES: u64 = 3000;

fn tokens() -> Vec<u32> {
    (0..64u64).map(|i| if i < 56 { (i * 2654435761 % 128256) as u32 } else { WIDE[(i - 56) as usize] }).collect()
}

/// chains[algo][with_extra][block]
fn chains() -> Vec<Vec<Vec<BlockHash>>> {
    let t = tokens();
    let mut all = Vec::new();
    for algo in [HashAlgo::Native, HashAlgo::VllmCbor] {
        let mut per = Vec::new();
        for x in 0..2 {
            let extra = match (algo, x) {
                (_, 0) => None,
                (HashAlgo::Native, _) => Some(EXTRA_NATIVE),
                _ => Some(EXTRA_CBOR),
            };
            let mut parent: Option<BlockHash> = None;
            let mut chain = Vec::new();
            for b in 0..4 {
                let h = block_hash(algo, TENANT, parent.as_ref(), &t[b * 16..b * 16 + 16], extra)
                    .unwrap_or_else(|e| fail(format!("block_hash: {}", e)));
                chain.push(h);
                parent = Some(h);
            }
            per.push(chain);
        }
        all.push(per);
    }
    all
}

fn hex(h: &BlockHash) -> String {
    h.iter().map(|b| format!("{:02x}", b)).collect()
}

fn unhex(s: &str) -> BlockHash {
    let mut out = [0u8; 32];
    if s.len() != 64 {
        fail(format!("bad hash {:?}", s));
    }
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap_or_else(|_| fail(format!("bad hash {:?}", s)));
    }
    out
}

/// Allocs, fills and publishes a block; returns what publish did.
fn publish_new(pool: &Pool, hash: &BlockHash, seed: u64, index: u64) -> (Handle, Published) {
    let hint = Hint { tenant: TENANT, token_count: 16, content_hash: Some(*hash), ..Default::default() };
    let h = pool.alloc(SHARED_BYTES, DType::Fp16, Some(&hint)).unwrap_or_else(|e| fail(format!("alloc: {}", e)));
    pool.write(h, 0, &pattern(seed, index, SHARED_BYTES)).unwrap_or_else(|e| fail(format!("write: {}", e)));
    let p = pool.publish(h, hash).unwrap_or_else(|e| fail(format!("publish: {}", e)));
    (h, p)
}

/// Returns the lines to append to SHARED_FILE.
fn sharing(pool: &Pool, seed: u64, shared: &str) -> Vec<String> {
    let c = chains();
    for (a, per) in c.iter().enumerate() {
        for (x, chain) in per.iter().enumerate() {
            for (b, h) in chain.iter().enumerate() {
                println!("hash {} {} {} {}", a, x, b, hex(h));
            }
        }
    }
    // 1. Every block earlier languages published: found by this tenant only.
    let prev = std::fs::read_to_string(shared).unwrap_or_default();
    let mut published = 0u64;
    let mut common: Option<(Handle, u64)> = None;
    for line in prev.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() != 6 {
            fail(format!("bad line in {}: {:?}", shared, line));
        }
        let num = |s: &str| -> u64 {
            let r = if let Some(hx) = s.strip_prefix("0x") { u64::from_str_radix(hx, 16) } else { s.parse() };
            r.unwrap_or_else(|_| fail(format!("bad number {:?}", s)))
        };
        let (index, hash, handle, bytes, s) = (num(f[1]), unhex(f[2]), Handle(num(f[3])), num(f[4]), num(f[5]));
        match pool.lookup(TENANT, &hash) {
            Ok(Some(h)) if h == handle => {}
            r => fail(format!("lookup of {}'s block {}: {:?}, want {}", f[0], index, r, handle)),
        }
        verify(pool, f[0], index, handle, bytes, s, true);
        match pool.lookup(TENANT + 1, &hash) {
            Ok(None) => {}
            r => fail(format!("tenant {} found {}'s block: {:?}", TENANT + 1, f[0], r)),
        }
        pool.free(handle).unwrap_or_else(|e| fail(format!("free (release) {}: {}", handle, e)));
        if index == 4 {
            common = Some((handle, s));
        }
        published += 1;
    }
    // 2. Our own block, under a hash no other language uses.
    let mine = c[0][1][((seed + 3) % 4) as usize];
    let mut out = Vec::new();
    match publish_new(pool, &mine, seed, 3) {
        (h, Published::New(p)) if p == h => {
            if pool.lookup(TENANT, &mine).ok().flatten() != Some(h) {
                fail("our own published block is not found".into());
            }
            pool.free(h).unwrap_or_else(|e| fail(format!("free (release): {}", e)));
            out.push(format!("{} 3 {} {:#018x} {} {}", LANG, hex(&mine), h.0, SHARED_BYTES, seed));
            published += 1;
        }
        r => fail(format!("publish under a fresh hash gave {:?}", r)),
    }
    // 3. The block every language computes: the first publisher wins, the
    //    others get its handle (SPECKV_EEXIST) and free their copy.
    let all = c[1][0][3];
    match (publish_new(pool, &all, seed, 4), common) {
        ((h, Published::New(p)), None) if p == h => {
            out.push(format!("{} 4 {} {:#018x} {} {}", LANG, hex(&all), h.0, SHARED_BYTES, seed));
            published += 1;
        }
        ((h, Published::Existing(p)), Some((first, s))) if p == first => {
            pool.free(h).unwrap_or_else(|e| fail(format!("free of the duplicate: {}", e)));
            verify(pool, "first publisher's", 4, first, SHARED_BYTES, s, true);
            pool.free(first).unwrap_or_else(|e| fail(format!("free (release): {}", e)));
        }
        (r, c) => fail(format!("publish of the common block gave {:?} (first publisher {:?})", r, c)),
    }
    let st = pool.stats().unwrap_or_else(|e| fail(format!("stats: {}", e)));
    if st.blocks_published != published || st.shared_bytes != published * SHARED_BYTES || st.lookup_hits < 1 {
        fail(format!("unexpected sharing stats {:?} ({} published)", st, published));
    }
    out
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
    if args.len() != 5 {
        eprintln!("usage: scenario POOL_PATH HANDLES_FILE SEED SHARED_FILE");
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
        let hint = Hint { tenant: 7, request: seed, layer: i as u32, token_pos: i as u64 * 16, token_count: 16, content_hash: None, flags: 0 };
        let h = pool.alloc(n, DType::Fp16, Some(&hint)).unwrap_or_else(|e| fail(format!("alloc: {}", e)));
        pool.write(h, 0, &pattern(seed, i as u64, n)).unwrap_or_else(|e| fail(format!("write: {}", e)));
        handles.push(h);
    }
    let hint = Hint { tenant: 7, request: seed, layer: 0, token_pos: 0, token_count: 16, content_hash: None, flags: 0 };
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
    let shared_lines = sharing(&pool, seed, &args[4]);
    pool.close().unwrap_or_else(|e| fail(format!("close: {}", e)));

    let mut out = std::fs::OpenOptions::new().create(true).append(true).open(list)
        .unwrap_or_else(|e| fail(format!("{}: {}", list, e)));
    for (i, &h) in handles.iter().enumerate() {
        let state = if i == 1 { "freed" } else { "live" };
        writeln!(out, "{} {} {:#018x} {} {} {}", LANG, i, h.0, SIZES[i], seed, state)
            .unwrap_or_else(|e| fail(format!("{}: {}", list, e)));
    }
    let mut out = std::fs::OpenOptions::new().create(true).append(true).open(&args[4])
        .unwrap_or_else(|e| fail(format!("{}: {}", args[4], e)));
    for l in shared_lines {
        writeln!(out, "{}", l).unwrap_or_else(|e| fail(format!("{}: {}", args[4], e)));
    }
    println!("{} scenario: ok (verified {} blocks of earlier languages)", LANG, checked);
}
