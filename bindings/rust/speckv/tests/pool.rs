//! Runs against the library named by SPECKV_LIB (ctest sets it to the fresh build).
use speckv::{Config, DType, Error, ErrorKind, Handle, Hint, Pool};
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
    let hint = Hint { tenant: 1, request: 2, layer: 3, token_pos: 0, token_count: 16, content_hash: None };
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
    let hint = Hint { content_hash: Some([9; 16]), ..Default::default() };
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
