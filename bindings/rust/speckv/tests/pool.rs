// SPDX-License-Identifier: Apache-2.0
//! Runs against the library named by SPECKV_LIB (ctest sets it to the fresh build).
use speckv::{block_hash, BlockHash, Config, DType, Error, ErrorKind, Handle, HashAlgo, Hint, Pool, Published};
use std::sync::atomic::{AtomicUsize, Ordering};

fn anon() -> Pool {
    Pool::open("anon:?size=8M").expect("open anon pool")
}

fn pattern(seed: u8, n: usize) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed)).collect()
}

static SEQ: AtomicUsize = AtomicUsize::new(0);

fn temp_pool_path() -> std::path::PathBuf {
    let dir = std::env::var("SPECKV_TEST_DIR").map(std::path::PathBuf::from).unwrap_or_else(|_| std::env::temp_dir());
    dir.join(format!("speckv-rust-{}-{}.pool", std::process::id(), SEQ.fetch_add(1, Ordering::SeqCst)))
}

#[test]
fn version_is_compatible() {
    let (n, s) = speckv::library_version().unwrap();
    assert!(speckv::check_version(n).is_ok());
    assert_eq!(speckv::version_text(n), s);
}

#[test]
fn incompatible_major_is_refused_with_both_versions() {
    let e: Error = speckv::check_version(10000).unwrap_err().into();
    assert_eq!(e.kind(), ErrorKind::Version);
    assert!(e.message.contains("1.0.0") && e.message.contains("0.1.0"), "{}", e);
}

#[test]
fn write_read_roundtrip_and_stats() {
    let pool = anon();
    let hint = Hint { tenant: 1, request: 2, layer: 3, token_pos: 0, token_count: 16, content_hash: None, flags: 0 };
    let h = pool.alloc(10000, DType::Fp16, Some(&hint)).unwrap();
    assert_ne!(h.0, 0);
    let data = pattern(5, 10000);
    pool.write(h, 0, &data).unwrap();
    pool.prefetch(&hint).unwrap();
    assert_eq!(pool.read_vec(h, 0, 10000).unwrap(), data);
    let mut part = [0u8; 10];
    pool.access(h, 4090, &mut part).unwrap();
    assert_eq!(&part[..], &data[4090..4100]);
    assert_eq!(pool.block_len(h).unwrap(), 10000);
    {
        let pin = pool.pin(h).unwrap();
        assert_eq!(&pin[..], &data[..]);
        // Pinned: this process may neither write nor free it.
        assert_eq!(pool.write(h, 0, &[1]).unwrap_err().kind(), ErrorKind::Busy);
        assert_eq!(pool.free(h).unwrap_err().kind(), ErrorKind::Busy);
    }
    let st = pool.stats().unwrap();
    assert_eq!(st.allocs, 1);
    assert_eq!(st.prefetch_hints, 1);
    assert_eq!(st.blocks_live, 1);
    let js = pool.stats_json().unwrap();
    assert!(js.starts_with('{') && js.contains("\"allocs\":1"), "{}", js);
    pool.free(h).unwrap();
    pool.close().unwrap();
}

#[test]
fn fresh_block_reads_zero_and_hash_hint_is_accepted() {
    let pool = anon();
    let hint = Hint { content_hash: Some([9; 32]), ..Default::default() };
    let h = pool.alloc(100, DType::Opaque, Some(&hint)).unwrap();
    assert_eq!(pool.read_vec(h, 0, 100).unwrap(), vec![0u8; 100]);
}

#[test]
fn bad_input_maps_to_errors() {
    let pool = anon();
    let h = pool.alloc(4096, DType::Fp32, None).unwrap();
    // wrong handle
    let e = pool.write(Handle(0xdead_beef), 0, &[1, 2]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BadHandle);
    assert_eq!(e.code, -6);
    assert!(!e.message.is_empty());
    assert!(e.to_string().contains("SPECKV_EBADHANDLE"), "{}", e);
    assert_eq!(pool.free(Handle(0)).unwrap_err().kind(), ErrorKind::BadHandle);
    // range
    assert_eq!(pool.write(h, 4000, &[0u8; 200]).unwrap_err().kind(), ErrorKind::Range);
    let mut b = [0u8; 2];
    assert_eq!(pool.access(h, 4095, &mut b).unwrap_err().kind(), ErrorKind::Range);
    assert_eq!(pool.access(h, u64::MAX, &mut b).unwrap_err().kind(), ErrorKind::Range);
    // empty buffers are fine
    pool.write(h, 0, &[]).unwrap();
    pool.access(h, 4096, &mut []).unwrap();
    // zero-byte alloc
    assert_eq!(pool.alloc(0, DType::Opaque, None).unwrap_err().kind(), ErrorKind::InvalidArgument);
    // too big
    assert_eq!(pool.alloc(1 << 40, DType::Opaque, None).unwrap_err().kind(), ErrorKind::NoSpace);
    // double free
    pool.free(h).unwrap();
    let e = pool.free(h).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BadHandle);
    // use after free
    assert_eq!(pool.access(h, 0, &mut b).unwrap_err().kind(), ErrorKind::BadHandle);
}

#[test]
fn bad_uris_and_config() {
    assert_eq!(Pool::open("bogus:x").err().unwrap().kind(), ErrorKind::Uri);
    assert_eq!(Pool::open("anon:?size=8M&frob=1").err().unwrap().kind(), ErrorKind::Uri);
    assert_eq!(Pool::open("a\0b").err().unwrap().kind(), ErrorKind::InvalidArgument);
    let mut cfg = Config::new().unwrap();
    assert_eq!(cfg.set_int("no.such.key", 1).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(cfg.load_toml("/nonexistent/speckv.toml").unwrap_err().kind(), ErrorKind::NotFound);
    assert!(Config::bounds("no.such.key").is_err());
}

#[test]
fn null_pointers_through_the_raw_layer() {
    // The safe API cannot pass NULL; the raw one can, and must get EINVAL back.
    let api = speckv::sys::load().unwrap();
    unsafe {
        assert_eq!((api.speckv_config_new)(std::ptr::null_mut()), speckv::sys::SPECKV_EINVAL);
        let mut out = std::ptr::null_mut();
        assert_eq!((api.speckv_pool_open)(std::ptr::null(), std::ptr::null(), &mut out), speckv::sys::SPECKV_EINVAL);
        assert!(out.is_null());
        assert_eq!((api.speckv_alloc)(std::ptr::null_mut(), 1, 0, std::ptr::null(), &mut 0), speckv::sys::SPECKV_EINVAL);
        assert_eq!((api.speckv_pool_close)(std::ptr::null_mut()), speckv::sys::SPECKV_OK);
        (api.speckv_config_free)(std::ptr::null_mut());
    }
}

#[test]
fn file_pool_survives_reopen() {
    let path = temp_pool_path();
    let uri = format!("file:{}?size=8M", path.display());
    let data = pattern(42, 5000);
    let h = {
        let pool = Pool::open(&uri).unwrap();
        let h = pool.alloc(5000, DType::Bf16, None).unwrap();
        pool.write(h, 0, &data).unwrap();
        h
    }; // dropped: closed
    let pool = Pool::open(&uri).unwrap();
    assert_eq!(pool.read_vec(h, 0, 5000).unwrap(), data);
    pool.free(h).unwrap();
    pool.close().unwrap();
    let _ = std::fs::remove_file(&path);
}

#[test]
fn pool_is_shared_across_threads() {
    let pool = std::sync::Arc::new(anon());
    let threads: Vec<_> = (0..4u8)
        .map(|t| {
            let pool = pool.clone();
            std::thread::spawn(move || {
                for _ in 0..20 {
                    let h = pool.alloc(3000, DType::Opaque, None).unwrap();
                    let d = pattern(t, 3000);
                    pool.write(h, 0, &d).unwrap();
                    assert_eq!(pool.read_vec(h, 0, 3000).unwrap(), d);
                    pool.free(h).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(pool.stats().unwrap().blocks_live, 0);
}

#[test]
fn log_sink_receives_messages_or_stays_silent() {
    let mut cfg = Config::new().unwrap();
    let seen = std::sync::Arc::new(AtomicUsize::new(0));
    let s2 = seen.clone();
    cfg.set_log(move |_lvl, msg| {
        assert!(!msg.is_empty());
        s2.fetch_add(1, Ordering::SeqCst);
    })
    .unwrap();
    let _ = cfg.set_int("log.level", 3);
    let pool = Pool::open_with("anon:?size=8M", &cfg).unwrap();
    drop(cfg); // the pool keeps the sink alive
    let h = pool.alloc(10, DType::Opaque, None).unwrap();
    pool.free(h).unwrap();
    pool.close().unwrap();
}

#[test]
fn library_of_another_major_is_refused() {
    // ctest builds a stub libspeckv 1.0.0 and names it in SPECKV_FAKE_LIB.
    let path = match std::env::var("SPECKV_FAKE_LIB") {
        Ok(p) => p,
        Err(_) => {
            eprintln!("SPECKV_FAKE_LIB not set: only the rule itself is tested");
            return;
        }
    };
    match speckv::sys::load_from(&path) {
        Err(e @ speckv::LoadError::Version { library: 10000, .. }) => {
            let err: Error = e.into();
            assert_eq!(err.kind(), ErrorKind::Version);
            assert!(err.message.contains("1.0.0") && err.message.contains("0.1.0"), "{}", err);
        }
        Err(e) => panic!("wrong error for a 1.0.0 library: {}", e),
        Ok(_) => panic!("a 1.0.0 library was accepted"),
    }
}

fn unhex(s: &str) -> BlockHash {
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
    }
    out
}

// Known answers from an encoder written from docs/sharing.md with Python's
// hashlib (tests/sharing/check_block_hash.py): the binding passes the tokens,
// parent and extra exactly as the header defines them.
const NATIVE_123: &str = "47afdf9567455994c77156d8c56c7a1b3281af4f1263f73e7397381867b64f3c";
const NATIVE_456_CHAINED: &str = "dc2a339e6ddaa8eeb190a8c5cf5b816330a1967e1c27fa9fc4028bbb0014d38d";
const VLLM_123: &str = "9ca3c050dcab71b7d20d7e21acb28a035ce8f2f5470d3f9724580ec57b7c7da0";
const VLLM_456_CHAINED: &str = "cc132b6b8db3b5db424d12733484912b37aade6cd8c2e2e83f5eb9a9fbbbf4e3";
const CBOR_LORA7: &[u8] = &[0x82, 0x66, b'l', b'o', b'r', b'a', b'-', b'7', 0x03];

#[test]
fn block_hash_is_deterministic_and_chains() {
    let n0 = block_hash(HashAlgo::Native, 7, None, &[1, 2, 3], None).unwrap();
    assert_eq!(n0, unhex(NATIVE_123));
    assert_eq!(block_hash(HashAlgo::Native, 7, None, &[1, 2, 3], None).unwrap(), n0);
    let n1 = block_hash(HashAlgo::Native, 7, Some(&n0), &[4, 5, 6], Some(b"model")).unwrap();
    assert_eq!(n1, unhex(NATIVE_456_CHAINED));
    // The parent, the tenant (native only) and the extra all count.
    assert_ne!(block_hash(HashAlgo::Native, 7, None, &[4, 5, 6], Some(b"model")).unwrap(), n1);
    assert_ne!(block_hash(HashAlgo::Native, 8, None, &[1, 2, 3], None).unwrap(), n0);
    assert_ne!(block_hash(HashAlgo::Native, 7, Some(&n0), &[4, 5, 6], None).unwrap(), n1);

    let v0 = block_hash(HashAlgo::VllmCbor, 7, None, &[1, 2, 3], None).unwrap();
    assert_eq!(v0, unhex(VLLM_123));
    assert_eq!(block_hash(HashAlgo::VllmCbor, 99, None, &[1, 2, 3], None).unwrap(), v0, "vLLM hash ignores the tenant");
    let v1 = block_hash(HashAlgo::VllmCbor, 7, Some(&v0), &[4, 5, 6], Some(CBOR_LORA7)).unwrap();
    assert_eq!(v1, unhex(VLLM_456_CHAINED));
    assert_ne!(v0, n0);
    // No tokens is a valid block; a malformed CBOR extra is not.
    block_hash(HashAlgo::VllmCbor, 0, None, &[], None).unwrap();
    let e = block_hash(HashAlgo::VllmCbor, 0, None, &[1], Some(&[0x82, 0x01])).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
}

fn filled(pool: &Pool, tenant: u64, seed: u8) -> Handle {
    let hint = Hint { tenant, token_count: 16, ..Default::default() };
    let h = pool.alloc(6000, DType::Fp16, Some(&hint)).unwrap();
    pool.write(h, 0, &pattern(seed, 6000)).unwrap();
    h
}

#[test]
fn publish_lookup_and_references() {
    let pool = anon();
    let hash = block_hash(HashAlgo::Native, 3, None, &[10, 11, 12, 13], None).unwrap();
    assert_eq!(pool.lookup(3, &hash).unwrap(), None);

    let a = filled(&pool, 3, 1);
    assert_eq!(pool.publish(a, &hash).unwrap(), Published::New(a));
    // Published blocks are immutable, and publish only once.
    assert_eq!(pool.write(a, 0, &[0]).unwrap_err().kind(), ErrorKind::Permission);
    assert_eq!(pool.publish(a, &hash).unwrap_err().kind(), ErrorKind::Permission);

    // Same tenant: found, with the first block's bytes. Other tenant: never.
    assert_eq!(pool.lookup(3, &hash).unwrap(), Some(a));
    assert_eq!(pool.read_vec(a, 0, 6000).unwrap(), pattern(1, 6000));
    assert_eq!(pool.lookup(4, &hash).unwrap(), None);

    // A second writer of the same content gets the first block back.
    let b = filled(&pool, 3, 1);
    let p = pool.publish(b, &hash).unwrap();
    assert_eq!(p, Published::Existing(a));
    assert!(p.existed());
    assert_eq!(p.handle(), a);
    pool.free(b).unwrap(); // still unpublished, still ours
    assert_eq!(pool.read_vec(b, 0, 1).unwrap_err().kind(), ErrorKind::BadHandle);

    let st = pool.stats().unwrap();
    assert_eq!(st.blocks_published, 1);
    assert_eq!(st.shared_bytes, 6000);
    assert_eq!((st.lookups, st.lookup_hits), (3, 1));
    assert_eq!(st.dedup_bytes, 2 * 6000, "one lookup hit and one publish collision");
    let js = pool.stats_json().unwrap();
    assert!(js.contains("\"blocks_published\":1"), "{}", js);

    // Three references (publish, lookup, collision): three frees release
    // them; the block stays published and findable.
    for _ in 0..3 {
        pool.free(a).unwrap();
    }
    assert_eq!(pool.free(a).unwrap_err().kind(), ErrorKind::BadHandle);
    assert_eq!(pool.lookup(3, &hash).unwrap(), Some(a));
    assert_eq!(pool.read_vec(a, 0, 6000).unwrap(), pattern(1, 6000));
    pool.free(a).unwrap();
}

#[test]
fn published_block_is_found_from_another_pool_handle() {
    let path = temp_pool_path();
    let uri = format!("file:{}?size=8M", path.display());
    let hash = block_hash(HashAlgo::VllmCbor, 0, None, &[1, 2, 3], Some(CBOR_LORA7)).unwrap();
    let a = {
        let pool = Pool::open(&uri).unwrap();
        let a = filled(&pool, 9, 4);
        assert_eq!(pool.publish(a, &hash).unwrap().handle(), a);
        a
    }; // closed: its reference is dropped, the block stays published
    let pool = Pool::open(&uri).unwrap();
    assert_eq!(pool.lookup(9, &hash).unwrap(), Some(a));
    assert_eq!(pool.lookup(1, &hash).unwrap(), None);
    assert_eq!(pool.read_vec(a, 0, 6000).unwrap(), pattern(4, 6000));
    pool.free(a).unwrap();
    pool.close().unwrap();
    let _ = std::fs::remove_file(&path);
}

#[test]
fn tenant_quota() {
    let pool = anon();
    let page = pool.stats().unwrap().page_size;
    assert_eq!(pool.tenant_usage(5).unwrap(), speckv::TenantUsage { pages_used: 0, max_pages: 0 });
    pool.set_tenant_quota(5, 2).unwrap();
    let hint = Hint { tenant: 5, ..Default::default() };
    let a = pool.alloc(2 * page, DType::Opaque, Some(&hint)).unwrap();
    let e = pool.alloc(1, DType::Opaque, Some(&hint)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Quota);
    assert_eq!(e.code, -18);
    assert!(e.to_string().contains("SPECKV_EQUOTA"), "{}", e);
    // Other tenants are not capped.
    let other = pool.alloc(page, DType::Opaque, Some(&Hint { tenant: 6, ..Default::default() })).unwrap();
    let u = pool.tenant_usage(5).unwrap();
    assert_eq!((u.pages_used, u.max_pages), (2, 2));
    pool.free(a).unwrap();
    assert_eq!(pool.tenant_usage(5).unwrap().pages_used, 0);
    pool.set_tenant_quota(5, 0).unwrap(); // no cap
    let big = pool.alloc(3 * page, DType::Opaque, Some(&hint)).unwrap();
    assert_eq!(pool.tenant_usage(5).unwrap(), speckv::TenantUsage { pages_used: 3, max_pages: 0 });
    pool.free(big).unwrap();
    pool.free(other).unwrap();
}

/// The integer value of `"key":N` in the stats JSON.
fn json_u64(js: &str, key: &str) -> u64 {
    let pat = format!("\"{}\":", key);
    let at = js.find(&pat).unwrap_or_else(|| panic!("{} not in {}", key, js)) + pat.len();
    js[at..].chars().take_while(|c| c.is_ascii_digit()).collect::<String>().parse().unwrap()
}

#[test]
fn translate_finds_the_block_of_a_token() {
    let pool = anon();
    let hint = Hint { tenant: 4, request: 11, layer: 2, token_pos: 16, token_count: 16, content_hash: None, flags: 0 };
    let h = pool.alloc(16 * 256, DType::Fp16, Some(&hint)).unwrap();
    assert_eq!(pool.translate(4, 11, 2, 20).unwrap(), Some((h, 4)));
    assert_eq!(pool.translate(4, 11, 2, 20).unwrap(), Some((h, 4))); // again: from the TLB
    assert_eq!(pool.translate(4, 11, 2, 16).unwrap(), Some((h, 0)));
    assert_eq!(pool.translate(4, 11, 2, 31).unwrap(), Some((h, 15)));
    // Outside the token range, or another tenant, request or layer: nothing.
    assert_eq!(pool.translate(4, 11, 2, 40).unwrap(), None);
    assert_eq!(pool.translate(4, 11, 2, 32).unwrap(), None);
    assert_eq!(pool.translate(4, 11, 2, 15).unwrap(), None);
    assert_eq!(pool.translate(5, 11, 2, 20).unwrap(), None);
    assert_eq!(pool.translate(4, 12, 2, 20).unwrap(), None);
    assert_eq!(pool.translate(4, 11, 3, 20).unwrap(), None);

    let st = pool.stats().unwrap();
    assert!(st.tlb_hits >= 1, "a repeated translation is a TLB hit: {:?}", st);
    assert!(st.tlb_misses >= 1, "{:?}", st);
    assert!(st.tlb_hit_rate() > 0.0 && st.tlb_hit_rate() < 1.0, "{:?}", st);
    assert!(st.prefetch_beta_ppm <= 1_000_000, "{:?}", st);

    // A freed block is never returned, not even from the TLB.
    pool.free(h).unwrap();
    assert_eq!(pool.translate(4, 11, 2, 20).unwrap(), None);
    assert_eq!(pool.translate(4, 11, 2, 16).unwrap(), None);
    pool.close().unwrap();
}

#[test]
fn tier_and_prefetch_stats_match_the_json() {
    let pool = anon();
    let hint = Hint { request: 1, layer: 0, token_pos: 0, token_count: 16, ..Default::default() };
    let h = pool.alloc(3 * 4096, DType::Fp16, Some(&hint)).unwrap();
    pool.write(h, 0, &pattern(3, 3 * 4096)).unwrap();
    pool.prefetch(&hint).unwrap();
    // A hint for a request nothing was allocated for is ignored (and counted).
    pool.prefetch(&Hint { request: 999, layer: 5, ..Default::default() }).unwrap();
    assert_eq!(pool.read_vec(h, 0, 3 * 4096).unwrap(), pattern(3, 3 * 4096));
    assert_eq!(pool.translate(0, 1, 0, 3).unwrap(), Some((h, 3)));
    // The prefetcher runs on its own thread: wait until it saw both hints.
    let mut st = pool.stats().unwrap();
    for _ in 0..200 {
        if st.prefetch_ignored >= 1 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        st = pool.stats().unwrap();
    }
    assert!(st.prefetch_ignored >= 1, "{:?}", st);
    assert_eq!(st.prefetch_hints, 2);
    let js = pool.stats_json().unwrap();
    let st = pool.stats().unwrap(); // taken after the JSON: counters only grow
    for (key, v) in [
        ("l2_hits", st.l2_hits),
        ("sync_reads", st.sync_reads),
        ("prefetch_pages", st.prefetch_pages),
        ("prefetch_used", st.prefetch_used),
        ("prefetch_wasted", st.prefetch_wasted),
        ("prefetch_wasted_bytes", st.prefetch_wasted_bytes),
        ("prefetch_ignored", st.prefetch_ignored),
        ("prefetch_dropped", st.prefetch_dropped),
        ("link_bytes", st.link_bytes),
        ("tlb_hits", st.tlb_hits),
        ("tlb_misses", st.tlb_misses),
    ] {
        assert!(json_u64(&js, key) <= v, "{}: JSON {} > struct {} ({})", key, json_u64(&js, key), v, js);
    }
    // Every page was read from somewhere: L1, L2 or the pool.
    assert!(st.cache_hits + st.l2_hits + st.sync_reads >= 3, "{:?}", st);
    assert!(st.tlb_misses >= 1, "{:?}", st);
    assert!(st.prefetch_beta_ppm <= 1_000_000, "{:?}", st);
    assert!((0.0..=1.0).contains(&st.hit_rate()) && (0.0..=1.0).contains(&st.prefetch_precision()));
    pool.free(h).unwrap();
}

// ------------------------------------------------------------------- codec

/// IEEE half-precision bits of `x` (round to nearest even; no NaN inputs).
fn f16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32 - 127 + 15;
    let man = b & 0x7f_ffff;
    if exp >= 31 {
        return sign | 0x7c00;
    }
    if exp <= 0 {
        return sign; // below the normal range: zero is close enough here
    }
    let mut h = ((exp as u32) << 10) | (man >> 13);
    let rest = man & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && (h & 1) == 1) {
        h += 1;
    }
    sign | h as u16
}

fn f16_value(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let e = ((h >> 10) & 0x1f) as i32;
    let m = (h & 0x3ff) as f32;
    sign * if e == 0 { m * 2f32.powi(-24) } else { (1024.0 + m) * 2f32.powi(e - 25) }
}

/// 2048 FP16 values of a sine wave (amplitude 1, not all equal), as 4096 bytes.
fn sine_fp16() -> Vec<u8> {
    (0..2048).flat_map(|i| f16_bits((i as f32 * 0.05).sin()).to_le_bytes()).collect()
}

fn halves(b: &[u8]) -> Vec<u16> {
    b.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect()
}

/// Opens an anon pool with the given codec settings, writes the sine wave
/// to a fresh 4096-byte FP16 block (allocated with `flags`), and returns
/// what was written, what reads back and the stats after the read.
fn codec_roundtrip(settings: &[(&str, &str)], flags: u32) -> (Vec<u8>, Vec<u8>, speckv::Stats, String) {
    let mut cfg = Config::new().unwrap();
    for (k, v) in settings {
        cfg.set_str(k, v).unwrap();
    }
    let pool = Pool::open_with("anon:?size=16M", &cfg).unwrap();
    let h = pool.alloc(4096, DType::Fp16, Some(&Hint { flags, ..Default::default() })).unwrap();
    let data = sine_fp16();
    assert_eq!(data.len(), 4096);
    pool.write(h, 0, &data).unwrap();
    let back = pool.read_vec(h, 0, 4096).unwrap();
    let st = pool.stats().unwrap();
    let js = pool.stats_json().unwrap();
    pool.free(h).unwrap();
    pool.close().unwrap();
    (data, back, st, js)
}

#[test]
fn codec_int8_stores_pages_compressed_and_reads_back_lossy() {
    let (data, back, st, js) = codec_roundtrip(&[("codec.mode", "int8")], 0);
    assert_eq!(st.codec_pages_encoded, 1, "{:?}", st);
    assert_eq!(st.codec_raw_bytes, 4096, "{:?}", st);
    assert!(st.codec_stored_bytes > 0 && st.codec_stored_bytes < st.codec_raw_bytes, "{:?}", st);
    assert_eq!(st.codec_pages_bypassed, 0, "{:?}", st);
    assert!(st.codec_ratio() > 1.0, "{:?}", st);
    assert_eq!(json_u64(&js, "codec_pages_encoded"), 1, "{}", js);
    assert_eq!(json_u64(&js, "codec_raw_bytes"), 4096, "{}", js);
    assert_eq!(json_u64(&js, "codec_stored_bytes"), st.codec_stored_bytes, "{}", js);
    assert!(js.contains("\"codec_ratio\":"), "{}", js);
    // Lossy: close to what was written, but not bitwise the same.
    let (w, r) = (halves(&data), halves(&back));
    let mut differ = 0;
    for (i, (a, b)) in w.iter().zip(r.iter()).enumerate() {
        let (x, y) = (f16_value(*a), f16_value(*b));
        assert!(y.is_finite() && (x - y).abs() <= 0.02, "value {}: wrote {} read {}", i, x, y);
        differ += (a != b) as usize;
    }
    assert!(differ > 0, "int8 read back every value bitwise identical: not coded");
}

#[test]
fn codec_raw_reads_back_exactly() {
    let (data, back, st, _) = codec_roundtrip(&[("codec.mode", "raw")], 0);
    assert_eq!(back, data);
    assert_eq!((st.codec_pages_encoded, st.codec_raw_bytes, st.codec_stored_bytes), (0, 0, 0), "{:?}", st);
    // The default is raw as well.
    let (data, back, st, _) = codec_roundtrip(&[], 0);
    assert_eq!(back, data);
    assert_eq!(st.codec_pages_encoded, 0, "{:?}", st);
}

#[test]
fn codec_key_and_value_modes_follow_the_hint_flags() {
    assert_eq!((speckv::HINT_HAS_HASH, speckv::HINT_KEYS, speckv::HINT_VALUES), (0x1, 0x2, 0x4));
    let keys_int8 = [("codec.mode", "raw"), ("codec.key_mode", "int8")];
    let (data, back, st, _) = codec_roundtrip(&keys_int8, speckv::HINT_KEYS);
    assert_eq!(st.codec_pages_encoded, 1, "{:?}", st);
    assert_ne!(back, data);
    let (data, back, st, _) = codec_roundtrip(&keys_int8, speckv::HINT_VALUES);
    assert_eq!(st.codec_pages_encoded, 0, "{:?}", st);
    assert_eq!(back, data);
    let values_int8 = [("codec.value_mode", "int8")];
    let (_, _, st, _) = codec_roundtrip(&values_int8, speckv::HINT_VALUES);
    assert_eq!(st.codec_pages_encoded, 1, "{:?}", st);
}

#[test]
fn codec_config_keys_are_checked() {
    let mut cfg = Config::new().unwrap();
    for m in ["raw", "paper", "int8", "k6", "vp6"] {
        cfg.set_str("codec.mode", m).unwrap();
        cfg.set_str("codec.key_mode", m).unwrap();
        cfg.set_str("codec.value_mode", m).unwrap();
    }
    assert_eq!(cfg.set_str("codec.mode", "zstd-99").unwrap_err().kind(), ErrorKind::InvalidArgument);
    cfg.set_int("codec.channels", 128).unwrap();
    assert_eq!(cfg.get_int("codec.channels").unwrap(), 128);
    assert_eq!(Config::bounds("codec.channels").unwrap(), (1, 65535, 1));
    assert_eq!(cfg.set_int("codec.channels", 0).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(cfg.set_int("codec.channels", 65536).unwrap_err().kind(), ErrorKind::InvalidArgument);
}

// ------------------------------------------------------------ L4 cold tier

#[test]
fn demote_moves_a_block_to_l4_and_a_read_brings_it_back() {
    let path = temp_pool_path();
    let l4 = path.with_extension("l4");
    let _ = std::fs::remove_file(&l4);
    let mut cfg = Config::new().unwrap();
    cfg.set_str("cold.path", l4.to_str().unwrap()).unwrap();
    // A text key: refused as an integer.
    assert_eq!(cfg.set_int("cold.path", 1).unwrap_err().kind(), ErrorKind::InvalidArgument);
    cfg.set_int("cold.batch", 4).unwrap();
    let pool = Pool::open_with(&format!("file:{}?size=4M", path.display()), &cfg).unwrap();
    let data = pattern(77, 10000);
    let h = pool.alloc(10000, DType::Opaque, None).unwrap();
    pool.write(h, 0, &data).unwrap();
    let st = pool.stats().unwrap();
    assert_eq!((st.l4_blocks, st.l4_bytes, st.l4_demotions, st.l4_promotions), (0, 0, 0, 0), "{:?}", st);
    let used = st.pages_used;

    pool.demote(h).unwrap();
    pool.demote(h).unwrap(); // in L4 already: still Ok
    let st = pool.stats().unwrap();
    assert_eq!(st.l4_blocks, 1, "{:?}", st);
    assert_eq!(st.l4_bytes, 10000, "{:?}", st);
    assert_eq!(st.l4_demotions, 1, "{:?}", st);
    assert_eq!(st.l4_promotions, 0, "{:?}", st);
    assert_eq!(st.l4_demote_failures, 0, "{:?}", st);
    assert!(st.pages_used < used, "the block's pages are freed: {:?}", st);
    let js = pool.stats_json().unwrap();
    assert_eq!(json_u64(&js, "l4_blocks"), 1, "{}", js);
    assert_eq!(json_u64(&js, "l4_demotions"), 1, "{}", js);
    assert!(js.contains("\"l4_holder\":true"), "{}", js);
    assert_eq!(pool.block_len(h).unwrap(), 10000); // metadata stays in the pool

    assert_eq!(pool.read_vec(h, 0, 10000).unwrap(), data);
    let st = pool.stats().unwrap();
    assert_eq!(st.l4_promotions, 1, "{:?}", st);
    assert_eq!(st.l4_blocks, 0, "{:?}", st);
    assert_eq!(st.l4_bytes, 0, "{:?}", st);
    assert_eq!(st.l4_demotions, 1, "{:?}", st);
    {
        // Pinned: it cannot move.
        let _pin = pool.pin(h).unwrap();
        assert_eq!(pool.demote(h).unwrap_err().kind(), ErrorKind::Busy);
    }
    pool.free(h).unwrap();
    assert_eq!(pool.demote(h).unwrap_err().kind(), ErrorKind::BadHandle);
    pool.close().unwrap();
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&l4);
}

#[test]
fn demote_without_cold_path_is_not_supported() {
    let path = temp_pool_path();
    let pool = Pool::open(&format!("file:{}?size=4M", path.display())).unwrap();
    let h = pool.alloc(5000, DType::Opaque, None).unwrap();
    pool.write(h, 0, &pattern(1, 5000)).unwrap();
    let e = pool.demote(h).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotSupported, "{}", e);
    assert!(e.message.contains("cold.path"), "{}", e);
    let st = pool.stats().unwrap();
    assert_eq!((st.l4_blocks, st.l4_demotions), (0, 0), "{:?}", st);
    assert!(pool.stats_json().unwrap().contains("\"l4_holder\":false"));
    assert_eq!(pool.read_vec(h, 0, 5000).unwrap(), pattern(1, 5000));
    pool.free(h).unwrap();
    pool.close().unwrap();
    let _ = std::fs::remove_file(&path);
}

#[test]
fn stats_of_the_older_layouts_are_still_accepted() {
    // speckv_pool_stats ending at codec_pages_decoded (328 bytes) and at
    // prefetch_depth (288): what bindings written before the L4 (and codec)
    // fields pass. Nothing past struct_size is written.
    use speckv::sys::{speckv_pool_stats, SPECKV_ESTRUCT};
    let api = speckv::sys::load().unwrap();
    let mut p = std::ptr::null_mut();
    // SAFETY: NUL-terminated URI, out-pointers to locals, the pool closed once.
    unsafe {
        assert_eq!((api.speckv_pool_open)(b"anon:?size=4M\0".as_ptr() as *const _, std::ptr::null(), &mut p), 0);
        for (size, rc) in [(368usize, 0), (328, 0), (288, 0), (320, SPECKV_ESTRUCT), (376, SPECKV_ESTRUCT)] {
            let mut s =
                speckv_pool_stats { struct_size: size, l4_blocks: 7, codec_pages_decoded: 7, ..Default::default() };
            assert_eq!((api.speckv_stats)(p, &mut s), rc, "struct_size {}", size);
            if rc == 0 {
                assert!(s.pool_bytes > 0, "struct_size {}", size);
                assert_eq!(s.l4_blocks, if size == 368 { 0 } else { 7 }, "struct_size {}", size);
                assert_eq!(s.codec_pages_decoded, if size == 288 { 7 } else { 0 }, "struct_size {}", size);
            }
        }
        assert_eq!((api.speckv_pool_close)(p), 0);
    }
}
