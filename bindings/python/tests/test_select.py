# SPDX-License-Identifier: Apache-2.0
"""Near-memory page selection (speckv_select, speckv_attend,
speckv_merge_partials) through the Python binding: the checks of
tests/unit/test_select.cc, against $SPECKV_LIB."""
import array
import ctypes
import math
import struct
import unittest

import speckv

KV_HEADS, HEAD_DIM, Q_PER_KV = 2, 32, 2
C = KV_HEADS * HEAD_DIM            # 64 channels: 128-byte FP16 rows
ROWS_PER_PAGE = 4096 // (C * 2)    # 32 tokens a page
BLOCK_TOKENS = 4 * ROWS_PER_PAGE   # 128 tokens, 4 pages a block
TOKENS = 300                       # 10 pages, the last one (12 tokens) still being appended
TENANT, REQUEST, LAYER = 3, 11, 2
Q_HEADS = KV_HEADS * Q_PER_KV


def lcg(seed):
    """Deterministic values in [-1, 1) (a 64-bit LCG)."""
    s = seed
    while True:
        s = (s * 6364136223846793005 + 1442695040888963407) & (2 ** 64 - 1)
        yield (s >> 40) / float(1 << 23) - 1.0


def fp16(x):
    """(bits, value) of x rounded to FP16."""
    b = struct.pack("<e", x)
    return struct.unpack("<H", b)[0], struct.unpack("<e", b)[0]


def query():
    r = lcg(11)
    return [0.3 * next(r) + (1.0 if i % HEAD_DIM == 3 else 0.0) for i in range(Q_HEADS * HEAD_DIM)]


def params(budget, **kw):
    return speckv.SelectParams(kv_heads=KV_HEADS, head_dim=HEAD_DIM, q_per_kv=Q_PER_KV, budget=budget,
                               context_tokens=TOKENS, **kw)


class Fixture:
    """A pool with TOKENS tokens of FP16 K and V of (TENANT, REQUEST, LAYER),
    appended token by token as a decoder does, in blocks of 128 tokens."""

    def __init__(self, summaries=True):
        with speckv.Config() as cfg:
            if summaries:
                cfg.set("pool.summary_bytes", 16 + 4 * C)  # 272
            cfg.set("select.channels", C)
            self.pool = speckv.Pool("anon:?size=32M", cfg)
        r = lcg(7)
        self.k, self.v = [], []  # FP16 values, [token][C] flattened
        kbits, vbits = [], []
        for t in range(TOKENS):
            for ch in range(C):
                # Pages 2 and 7 carry keys aligned with the query direction (channel 3 of each head).
                bump = 3.0 if (t // ROWS_PER_PAGE) % 5 == 2 and ch % HEAD_DIM == 3 else 0.0
                kb, kv = fp16(next(r) + bump)
                vb, vv = fp16(next(r))
                kbits.append(kb)
                vbits.append(vb)
                self.k.append(kv)
                self.v.append(vv)
        self.kb, self.vb = [], []
        for t in range(TOKENS):
            if t % BLOCK_TOKENS == 0:
                for flags, lst in ((speckv.HINT_KEYS, self.kb), (speckv.HINT_VALUES, self.vb)):
                    hint = speckv.Hint(tenant=TENANT, request=REQUEST, layer=LAYER, token_pos=t,
                                       token_count=BLOCK_TOKENS, flags=flags)
                    lst.append(self.pool.alloc(4096 * 4, speckv.FP16, hint))
            off = (t % BLOCK_TOKENS) * C * 2
            self.pool.write(self.kb[-1], off, struct.pack("<%dH" % C, *kbits[t * C:(t + 1) * C]))
            self.pool.write(self.vb[-1], off, struct.pack("<%dH" % C, *vbits[t * C:(t + 1) * C]))

    def close(self):
        self.pool.close()


class SelectTest(unittest.TestCase):
    def setUp(self):
        self.f = Fixture()
        self.pool = self.f.pool

    def tearDown(self):
        self.f.close()

    def assert_close(self, what, got, want, rel=1e-5):
        self.assertEqual(len(got), len(want), what)
        for i, (a, b) in enumerate(zip(got, want)):
            self.assertLessEqual(abs(a - b), rel * max(1.0, abs(b)), "%s[%d]: %r vs %r" % (what, i, a, b))

    def test_select_returns_the_budget_in_token_order_ending_with_the_recent_page(self):
        q = query()
        sel = self.pool.select(TENANT, REQUEST, LAYER, q, params(3))
        self.assertIsInstance(sel, list)
        self.assertEqual(sel.total_pages, 10)
        self.assertEqual(len(sel), 3, sel)
        self.assertTrue(all(isinstance(r, speckv.PageRef) for r in sel))
        self.assertEqual([r.token_pos for r in sel], sorted(r.token_pos for r in sel))
        last = sel[-1]
        self.assertEqual(last.token_pos, 9 * ROWS_PER_PAGE)
        self.assertEqual(last.tokens, TOKENS - 9 * ROWS_PER_PAGE)
        self.assertEqual((last.block, last.offset), (self.f.kb[2], 4096))
        self.assertEqual(last.score, math.inf)  # the page being appended has no summary
        # The two others are the pages with the aligned keys (2 and 7), complete, with finite bounds.
        for r, page in zip(sel[:2], (2, 7)):
            self.assertEqual(r.token_pos, page * ROWS_PER_PAGE, sel)
            self.assertEqual(r.tokens, ROWS_PER_PAGE)
            self.assertEqual((r.block, r.offset), (self.f.kb[page // 4], page % 4 * 4096))
            self.assertTrue(math.isfinite(r.score), r)
        # q as array('f') gives the same; the defaults of recent and band are the config's.
        again = self.pool.select(TENANT, REQUEST, LAYER, array.array("f", q), params(3, recent=1, band=0.0))
        self.assertEqual(list(again), list(sel))
        st = self.pool.stats()
        self.assertEqual(st["summaries_written"], 9, st)  # the 9 complete K pages
        self.assertEqual(st["select_calls"], 2, st)
        for k in ("select_entered", "select_churn", "attend_calls"):
            self.assertIn(k, st)

    def test_attend_of_the_selection_merged_with_the_rest_equals_full_attention(self):
        q = query()
        sp = params(3)
        sel = self.pool.select(TENANT, REQUEST, LAYER, q, sp)
        every = self.pool.select(TENANT, REQUEST, LAYER, q, params(2 ** 32 - 1))  # a budget of "everything"
        self.assertEqual(len(every), 10)
        keys = {(r.block, r.offset) for r in sel}
        rest = [r for r in every if (r.block, r.offset) not in keys]
        self.assertEqual(len(rest), 7)

        near = self.pool.attend(TENANT, REQUEST, LAYER, q, sp, exclude=sel)   # all but the selection
        gpu = self.pool.attend(TENANT, REQUEST, LAYER, q, sp, exclude=rest)   # only the selection
        full = self.pool.attend(TENANT, REQUEST, LAYER, q, sp)
        for p in (near, gpu, full):
            self.assertEqual((len(p.out), len(p.max_score), len(p.sum_exp)), (Q_HEADS * HEAD_DIM, Q_HEADS, Q_HEADS))
            self.assertEqual((p.q_heads, p.head_dim), (Q_HEADS, HEAD_DIM))
        merged = near.merge(gpu)
        self.assertEqual(merged, speckv.merge_partials(near, gpu))
        self.assert_close("out", merged.out, full.out)
        self.assert_close("max_score", merged.max_score, full.max_score)
        self.assert_close("sum_exp", merged.sum_exp, full.sum_exp)
        # Each part alone is not the whole (the split really happened): their
        # weights, rescaled to the full maximum, are both > 0 and add up.
        for h in range(Q_HEADS):
            def w(p):
                return p.sum_exp[h] * math.exp(p.max_score[h] - full.max_score[h])
            wn, wg, wf = w(near), w(gpu), full.sum_exp[h]
            self.assertTrue(0 < wn < wf and 0 < wg < wf, (h, wn, wg, wf))
            self.assertLessEqual(abs(wn + wg - wf), 1e-5 * wf)
        # And the whole is attention over every token, computed here from the FP16 values.
        k, v = self.f.k, self.f.v
        scale = 1 / math.sqrt(HEAD_DIM)
        for h in range(Q_HEADS):
            g = h // Q_PER_KV
            qh = q[h * HEAD_DIM:(h + 1) * HEAD_DIM]
            logits = [scale * sum(a * b for a, b in zip(qh, k[t * C + g * HEAD_DIM:t * C + (g + 1) * HEAD_DIM]))
                      for t in range(TOKENS)]
            m = max(logits)
            ws = [math.exp(l - m) for l in logits]
            total = sum(ws)
            for c in range(HEAD_DIM):
                want = sum(wt * v[t * C + g * HEAD_DIM + c] for t, wt in enumerate(ws)) / total
                got = full.out[h * HEAD_DIM + c]
                self.assertLess(abs(got - want), 1e-4 * (1 + abs(want)), (h, c, got, want))
        # Everything excluded: the identity of the merge.
        none = self.pool.attend(TENANT, REQUEST, LAYER, q, sp, exclude=every)
        self.assertEqual(none, speckv.Partial.empty(Q_HEADS, HEAD_DIM))
        self.assertEqual(none.merge(full).out, full.out)
        self.assertEqual(self.pool.stats()["attend_calls"], 4)

    def test_bad_input_raises_the_mapped_errors(self):
        q = query()
        sp = params(3)
        with self.assertRaises(speckv.InvalidError) as cm:
            self.pool.select(TENANT, REQUEST, LAYER, q[1:], sp)
        self.assertEqual(cm.exception.code, -1)
        self.assertIn("query heads", cm.exception.message)
        self.assertIsInstance(cm.exception, ValueError)
        with self.assertRaises(speckv.InvalidError):
            self.pool.attend(TENANT, REQUEST, LAYER, q[1:], sp)
        with self.assertRaises(speckv.InvalidError) as cm:
            self.pool.select(TENANT, REQUEST, LAYER, q, params(0))
        self.assertEqual(cm.exception.code, -1)
        self.assertIn("budget", cm.exception.message)
        with self.assertRaises(speckv.InvalidError):
            self.pool.attend(TENANT, REQUEST, LAYER, q, speckv.SelectParams(KV_HEADS, 0, Q_PER_KV, 3))
        with self.assertRaises(speckv.InvalidError):
            self.pool.select(TENANT, REQUEST, LAYER, [math.nan] + q[1:], sp)
        with self.assertRaises(speckv.InvalidError):
            self.pool.select(TENANT, REQUEST, LAYER, ["x"] * len(q), sp)
        with self.assertRaises(speckv.InvalidError):
            self.pool.select(TENANT, REQUEST, LAYER, q, params(2 ** 32))  # not a uint32_t
        with self.assertRaises(speckv.NotFoundError) as cm:
            self.pool.select(TENANT, REQUEST + 1, LAYER, q, sp)  # no K page
        self.assertEqual(cm.exception.code, -4)
        # Partials of different shapes, or inconsistent ones, do not merge.
        a = speckv.Partial.empty(4, 32)
        for b in (speckv.Partial.empty(4, 16), speckv.Partial.empty(0, 32),
                  speckv.Partial(a.out, a.max_score, a.sum_exp[:3])):
            with self.assertRaises(speckv.InvalidError):
                a.merge(b)
        self.assertEqual(a.merge(a), a)  # empty with empty: still empty
        # The raw layer: the library checks struct_size.
        lib = speckv.load()
        raw = a._raw()
        raw.struct_size = 4
        self.assertEqual(lib.speckv_merge_partials(4, 32, ctypes.byref(raw), ctypes.byref(raw), ctypes.byref(raw)),
                         -16)
        self.pool.close()
        with self.assertRaises(speckv.InvalidError):
            self.pool.select(TENANT, REQUEST, LAYER, q, sp)

    def test_struct_layout(self):
        # offsetof() against include/speckv.h on LP64 (a C program printed these).
        S, R, P = speckv._SelectParams, speckv._PageRef, speckv._Partial
        self.assertEqual(ctypes.sizeof(S), 48)
        self.assertEqual([getattr(S, f).offset for f in ("kv_heads", "head_dim", "q_per_kv", "budget", "recent",
                                                         "band", "scale", "context_tokens")],
                         [8, 12, 16, 20, 24, 28, 32, 40])
        self.assertEqual(ctypes.sizeof(R), 32)
        self.assertEqual([getattr(R, f).offset for f in ("block", "offset", "token_pos", "tokens", "score")],
                         [0, 8, 16, 24, 28])
        self.assertEqual(ctypes.sizeof(P), 32)
        self.assertEqual([getattr(P, f).offset for f in ("out", "max_score", "sum_exp")], [8, 16, 24])
        raw = params(3)._raw()
        self.assertEqual((raw.struct_size, raw.recent, raw.band, raw.scale), (48, 0xFFFFFFFF, -1.0, 0.0))


class NoSummaryTest(unittest.TestCase):
    def test_pool_without_summary_area(self):
        f = Fixture(summaries=False)
        try:
            with self.assertRaises(speckv.NotSupportedError) as cm:
                f.pool.select(TENANT, REQUEST, LAYER, query(), params(3))
            self.assertEqual(cm.exception.code, -15)
            self.assertIn("pool.summary_bytes", cm.exception.message)
        finally:
            f.close()
        with speckv.Config() as cfg:
            cfg.set("pool.summary_bytes", 100)  # not a multiple of 16: refused when the pool is created
            with self.assertRaises(speckv.InvalidError):
                speckv.Pool("anon:?size=8M", cfg)


if __name__ == "__main__":
    unittest.main()
