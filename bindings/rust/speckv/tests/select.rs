// SPDX-License-Identifier: Apache-2.0
//! Near-memory page selection through the safe crate (speckv_select,
//! speckv_attend, speckv_merge_partials): the checks of
//! tests/unit/test_select.cc, against the library named by SPECKV_LIB.
use speckv::{merge_partials, Config, DType, ErrorKind, Handle, Hint, PageRef, Partial, Pool, SelectParams};

const KV_HEADS: u32 = 2;
const HEAD_DIM: u32 = 32;
const Q_PER_KV: u32 = 2;
const C: usize = (KV_HEADS * HEAD_DIM) as usize; // 64 channels: 128-byte FP16 rows
const ROWS_PER_PAGE: u64 = 4096 / (C as u64 * 2); // 32 tokens a page
const BLOCK_TOKENS: u64 = 4 * ROWS_PER_PAGE; // 128 tokens, 4 pages a block
const TOKENS: u64 = 300; // 10 pages, the last one (12 tokens) still being appended
const TENANT: u64 = 3;
const REQUEST: u64 = 11;
const LAYER: u32 = 2;

/// IEEE half-precision bits of `x` (round to nearest even; |x| < 65504, no NaN).
fn f16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32 - 127 + 15;
    let man = b & 0x7f_ffff;
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

fn f16_value(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let e = ((h >> 10) & 0x1f) as i32;
    let m = (h & 0x3ff) as f64;
    sign * if e == 0 { m * 2f64.powi(-24) } else { (1024.0 + m) * 2f64.powi(e - 25) }
}

/// Deterministic values in [-1, 1) (a 64-bit LCG).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32) / (1u64 << 23) as f32 - 1.0
    }
}

struct Fixture {
    pool: Pool,
    k: Vec<u16>, // [token][C], everything written
    v: Vec<u16>,
    kb: Vec<Handle>,
}

fn fixture(summaries: bool) -> Fixture {
    let mut cfg = Config::new().unwrap();
    if summaries {
        cfg.set_int("pool.summary_bytes", 16 + 4 * C as i64).unwrap(); // 272
    }
    cfg.set_int("select.channels", C as i64).unwrap();
    let pool = Pool::open_with("anon:?size=32M", &cfg).unwrap();
    let mut rng = Lcg(7);
    let (mut k, mut v) = (Vec::new(), Vec::new());
    for t in 0..TOKENS {
        for ch in 0..C {
            // Pages 2 and 7 carry keys aligned with the query direction (channel 3 of each head).
            let bump = if (t / ROWS_PER_PAGE) % 5 == 2 && ch % HEAD_DIM as usize == 3 { 3.0 } else { 0.0 };
            k.push(f16_bits(rng.next() + bump));
            v.push(f16_bits(rng.next()));
        }
    }
    let (mut kb, mut vb) = (Vec::new(), Vec::new());
    // Appended token by token, as a decoder does: K and V blocks of 128 tokens.
    for t in 0..TOKENS {
        if t % BLOCK_TOKENS == 0 {
            for (flags, list) in [(speckv::HINT_KEYS, &mut kb), (speckv::HINT_VALUES, &mut vb)] {
                let hint = Hint {
                    tenant: TENANT,
                    request: REQUEST,
                    layer: LAYER,
                    token_pos: t,
                    token_count: BLOCK_TOKENS,
                    content_hash: None,
                    flags,
                };
                list.push(pool.alloc(4096 * 4, DType::Fp16, Some(&hint)).unwrap());
            }
        }
        let off = (t % BLOCK_TOKENS) * C as u64 * 2;
        let row = |src: &[u16]| -> Vec<u8> {
            src[t as usize * C..(t as usize + 1) * C].iter().flat_map(|h| h.to_le_bytes()).collect()
        };
        pool.write(*kb.last().unwrap(), off, &row(&k)).unwrap();
        pool.write(*vb.last().unwrap(), off, &row(&v)).unwrap();
    }
    Fixture { pool, k, v, kb }
}

fn params(budget: u32) -> SelectParams {
    SelectParams {
        kv_heads: KV_HEADS,
        head_dim: HEAD_DIM,
        q_per_kv: Q_PER_KV,
        budget,
        context_tokens: TOKENS,
        ..Default::default()
    }
}

fn query() -> Vec<f32> {
    let mut rng = Lcg(11);
    (0..(KV_HEADS * Q_PER_KV * HEAD_DIM) as usize)
        .map(|i| 0.3 * rng.next() + if i % HEAD_DIM as usize == 3 { 1.0 } else { 0.0 })
        .collect()
}

/// Full attention in double precision from the FP16 bits themselves.
fn full_attention(f: &Fixture, q: &[f32]) -> Vec<f64> {
    let (d, qh) = (HEAD_DIM as usize, (KV_HEADS * Q_PER_KV) as usize);
    let scale = 1.0 / (d as f64).sqrt();
    let mut out = vec![0.0; qh * d];
    for h in 0..qh {
        let g = h / Q_PER_KV as usize;
        let logits: Vec<f64> = (0..TOKENS as usize)
            .map(|t| (0..d).map(|c| q[h * d + c] as f64 * f16_value(f.k[t * C + g * d + c])).sum::<f64>() * scale)
            .collect();
        let m = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = logits.iter().map(|l| (l - m).exp()).sum();
        for (t, l) in logits.iter().enumerate() {
            let w = (l - m).exp() / sum;
            for c in 0..d {
                out[h * d + c] += w * f16_value(f.v[t * C + g * d + c]);
            }
        }
    }
    out
}

fn json_u64(js: &str, key: &str) -> u64 {
    let pat = format!("\"{}\":", key);
    let at = js.find(&pat).unwrap_or_else(|| panic!("{} not in {}", key, js)) + pat.len();
    js[at..].chars().take_while(|c| c.is_ascii_digit()).collect::<String>().parse().unwrap()
}

fn assert_close(what: &str, got: &[f32], want: &[f32], rel: f32) {
    assert_eq!(got.len(), want.len(), "{}", what);
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= rel * b.abs().max(1.0),
            "{}[{}]: {} vs {} (relative tolerance {})",
            what,
            i,
            a,
            b,
            rel
        );
    }
}

#[test]
fn select_returns_the_budget_in_token_order_ending_with_the_recent_page() {
    let f = fixture(true);
    let q = query();
    let (sel, pages) = f.pool.select_counted(TENANT, REQUEST, LAYER, &q, &params(3)).unwrap();
    assert_eq!(pages, 10);
    assert_eq!(sel.len(), 3, "{:?}", sel);
    for w in sel.windows(2) {
        assert!(w[0].token_pos < w[1].token_pos, "not in token order: {:?}", sel);
    }
    let last = sel[2];
    assert_eq!(last.token_pos, 9 * ROWS_PER_PAGE, "{:?}", sel);
    assert_eq!(last.tokens as u64, TOKENS - 9 * ROWS_PER_PAGE);
    assert_eq!((last.block, last.offset), (f.kb[2], 4096));
    assert!(last.score.is_infinite() && last.score > 0.0, "the page being appended has no summary: {:?}", last);
    // The two others are the pages with the aligned keys (2 and 7), complete, with finite bounds.
    assert_eq!((sel[0].token_pos, sel[1].token_pos), (2 * ROWS_PER_PAGE, 7 * ROWS_PER_PAGE), "{:?}", sel);
    for r in &sel[..2] {
        assert!(r.score.is_finite() && r.tokens as u64 == ROWS_PER_PAGE, "{:?}", r);
        assert_eq!(r.block, f.kb[(r.token_pos / BLOCK_TOKENS) as usize]);
        assert_eq!(r.offset, (r.token_pos % BLOCK_TOKENS) / ROWS_PER_PAGE * 4096);
    }
    // select() is select_counted() without the count.
    assert_eq!(f.pool.select(TENANT, REQUEST, LAYER, &q, &params(3)).unwrap(), sel);
    let js = f.pool.stats_json().unwrap();
    assert_eq!(json_u64(&js, "summaries_written"), 9, "{}", js); // the 9 complete K pages
    assert_eq!(json_u64(&js, "select_calls"), 2, "{}", js);
    assert!(js.contains("\"select_entered\":") && js.contains("\"select_churn\":"), "{}", js);
}

#[test]
fn attend_of_the_selection_merged_with_the_rest_equals_full_attention() {
    let f = fixture(true);
    let q = query();
    let p = params(3);
    let sel = f.pool.select(TENANT, REQUEST, LAYER, &q, &p).unwrap();
    // Every page: a budget of "everything".
    let all = f.pool.select(TENANT, REQUEST, LAYER, &q, &params(u32::MAX)).unwrap();
    assert_eq!(all.len(), 10);
    let rest: Vec<PageRef> = all.iter().filter(|r| !sel.iter().any(|s| s.same_page(r))).cloned().collect();
    assert_eq!(rest.len(), 7);

    let near = f.pool.attend(TENANT, REQUEST, LAYER, &q, &p, &sel).unwrap(); // all but the selection
    let gpu = f.pool.attend(TENANT, REQUEST, LAYER, &q, &p, &rest).unwrap(); // only the selection
    let full = f.pool.attend(TENANT, REQUEST, LAYER, &q, &p, &[]).unwrap();
    let qh = (KV_HEADS * Q_PER_KV) as usize;
    for part in [&near, &gpu, &full] {
        assert_eq!((part.out.len(), part.max_score.len(), part.sum_exp.len()), (qh * HEAD_DIM as usize, qh, qh));
        assert_eq!((part.q_heads(), part.head_dim()), (qh, HEAD_DIM as usize));
    }
    let merged = near.merge(&gpu).unwrap();
    assert_eq!(merged, merge_partials(&near, &gpu).unwrap());
    assert_close("out", &merged.out, &full.out, 1e-5);
    assert_close("max_score", &merged.max_score, &full.max_score, 1e-5);
    assert_close("sum_exp", &merged.sum_exp, &full.sum_exp, 1e-5);
    // Each part alone is not the whole (the split really happened): their
    // weights, rescaled to the full maximum, are both > 0 and add up.
    for h in 0..qh {
        let w = |p: &Partial| p.sum_exp[h] as f64 * ((p.max_score[h] - full.max_score[h]) as f64).exp();
        let (wn, wg, wf) = (w(&near), w(&gpu), full.sum_exp[h] as f64);
        assert!(wn > 0.0 && wg > 0.0 && wn < wf && wg < wf, "head {}: {} + {} vs {}", h, wn, wg, wf);
        assert!((wn + wg - wf).abs() <= 1e-5 * wf, "head {}: {} + {} vs {}", h, wn, wg, wf);
    }
    // And the whole is attention over every token, computed here from the FP16 bits.
    let want = full_attention(&f, &q);
    for (i, (a, b)) in full.out.iter().zip(&want).enumerate() {
        assert!((*a as f64 - b).abs() < 1e-4 * (1.0 + b.abs()), "out[{}]: {} vs {}", i, a, b);
    }
    // Everything excluded: the identity of the merge.
    let none = f.pool.attend(TENANT, REQUEST, LAYER, &q, &p, &all).unwrap();
    assert_eq!(none, Partial::empty(qh, HEAD_DIM as usize));
    assert_eq!(none.merge(&full).unwrap().out, full.out);
    assert_eq!(json_u64(&f.pool.stats_json().unwrap(), "attend_calls"), 4);
}

#[test]
fn bad_input_maps_to_errors() {
    let f = fixture(true);
    let q = query();
    let p = params(3);
    let e = f.pool.select(TENANT, REQUEST, LAYER, &q[1..], &p).unwrap_err();
    assert_eq!((e.kind(), e.code), (ErrorKind::InvalidArgument, -1), "{}", e);
    assert!(e.message.contains("query heads"), "{}", e);
    let e = f.pool.attend(TENANT, REQUEST, LAYER, &q[1..], &p, &[]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{}", e);
    let e = f.pool.select(TENANT, REQUEST, LAYER, &q, &params(0)).unwrap_err();
    assert_eq!((e.kind(), e.code), (ErrorKind::InvalidArgument, -1), "{}", e);
    assert!(e.message.contains("budget"), "{}", e);
    let bad = SelectParams { head_dim: 0, ..p };
    assert_eq!(f.pool.select(TENANT, REQUEST, LAYER, &q, &bad).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(f.pool.attend(TENANT, REQUEST, LAYER, &q, &bad, &[]).unwrap_err().kind(), ErrorKind::InvalidArgument);
    let mut qnan = q.clone();
    qnan[0] = f32::NAN;
    assert_eq!(f.pool.select(TENANT, REQUEST, LAYER, &qnan, &p).unwrap_err().kind(), ErrorKind::InvalidArgument);
    // No K page of another request.
    let e = f.pool.select(TENANT, REQUEST + 1, LAYER, &q, &p).unwrap_err();
    assert_eq!((e.kind(), e.code), (ErrorKind::NotFound, -4), "{}", e);
    // Partials of different shapes, or inconsistent ones, do not merge.
    let a = Partial::empty(4, 32);
    assert_eq!(a.merge(&Partial::empty(4, 16)).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(a.merge(&Partial::empty(0, 32)).unwrap_err().kind(), ErrorKind::InvalidArgument);
    let mut c = a.clone();
    c.sum_exp.pop();
    assert_eq!(merge_partials(&c, &a).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(a.merge(&a).unwrap(), a); // empty with empty: still empty
}

#[test]
fn a_pool_without_a_summary_area_is_not_supported() {
    let f = fixture(false);
    let e = f.pool.select(TENANT, REQUEST, LAYER, &query(), &params(3)).unwrap_err();
    assert_eq!((e.kind(), e.code), (ErrorKind::NotSupported, -15), "{}", e);
    assert!(e.message.contains("pool.summary_bytes"), "{}", e);
    // A summary slot that is not a multiple of 16 is refused when the pool is created.
    let mut cfg = Config::new().unwrap();
    cfg.set_int("pool.summary_bytes", 100).unwrap();
    let e = Pool::open_with("anon:?size=8M", &cfg).err().expect("summary_bytes 100 accepted");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{}", e);
}

#[test]
fn raw_layer_rejects_an_unknown_struct_size() {
    // The safe crate always sets struct_size; the raw layer shows that the
    // library checks it (and that the sys declarations reach it).
    use speckv::sys;
    let api = sys::load().unwrap();
    let q = query();
    let mut cfg = std::ptr::null_mut();
    let mut pool = std::ptr::null_mut();
    // SAFETY: out-pointers to locals, NUL-terminated strings.
    unsafe {
        assert_eq!((api.speckv_config_new)(&mut cfg), sys::SPECKV_OK);
        assert_eq!((api.speckv_config_set_int)(cfg, "pool.summary_bytes\0".as_ptr() as *const _, 272), sys::SPECKV_OK);
        assert_eq!((api.speckv_pool_open)("anon:?size=8M\0".as_ptr() as *const _, cfg, &mut pool), sys::SPECKV_OK);
    }
    let mut sp = sys::speckv_select_params {
        struct_size: 8,
        kv_heads: KV_HEADS,
        head_dim: HEAD_DIM,
        q_per_kv: Q_PER_KV,
        budget: 1,
        recent: u32::MAX,
        band: -1.0,
        scale: 0.0,
        context_tokens: TOKENS,
    };
    let mut out = [sys::speckv_page_ref::default(); 1];
    let mut n = 0usize;
    let select = |sp: &sys::speckv_select_params, out: &mut [sys::speckv_page_ref], n: &mut usize| {
        // SAFETY: live pool; q, out and the params are live for the call.
        unsafe {
            (api.speckv_select)(
                pool,
                1,
                2,
                3,
                q.as_ptr(),
                q.len(),
                sp,
                out.as_mut_ptr(),
                out.len(),
                n,
                std::ptr::null_mut(),
            )
        }
    };
    assert_eq!(select(&sp, &mut out, &mut n), sys::SPECKV_ESTRUCT);
    sp.struct_size = std::mem::size_of::<sys::speckv_select_params>();
    assert_eq!(select(&sp, &mut out, &mut n), sys::SPECKV_ENOENT); // no K page of request 2

    let (mut a, mut b, mut c) = (vec![1f32; 4], vec![0f32; 1], vec![1f32; 1]);
    let mut part =
        sys::speckv_partial { struct_size: 4, out: a.as_mut_ptr(), max_score: b.as_mut_ptr(), sum_exp: c.as_mut_ptr() };
    let pc = part;
    // SAFETY: arrays of 1 head x 4 floats; out may alias a or b (speckv.h).
    assert_eq!(unsafe { (api.speckv_merge_partials)(1, 4, &pc, &pc, &mut part) }, sys::SPECKV_ESTRUCT);
    part.struct_size = std::mem::size_of::<sys::speckv_partial>();
    let pc = part;
    // SAFETY: as above.
    assert_eq!(unsafe { (api.speckv_merge_partials)(1, 4, &pc, &pc, &mut part) }, sys::SPECKV_OK);
    assert_eq!((a, b, c), (vec![1f32; 4], vec![0f32], vec![2f32])); // two equal halves: the sum doubles
                                                                    // SAFETY: owned, closed and freed once.
    unsafe {
        assert_eq!((api.speckv_pool_close)(pool), sys::SPECKV_OK);
        (api.speckv_config_free)(cfg);
    }
}
