# SPDX-License-Identifier: Apache-2.0
"""Runs against $SPECKV_LIB (ctest sets it to the fresh build):
    cd bindings/python && python3 -m unittest -v
"""
import array
import ctypes
import hashlib
import math
import os
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import speckv


def pattern(seed, n):
    return bytes((seed + i * 7) & 0xFF for i in range(n))


class StatsAgree:
    # Counted by this process's prefetcher thread too (asynchronously), or not
    # counters: they may move between two stats calls.
    _ASYNC = {"l2_hits", "sync_reads", "prefetch_pages", "prefetch_used", "prefetch_wasted",
              "prefetch_wasted_bytes", "prefetch_ignored", "prefetch_dropped", "link_bytes",
              "codec_pages_decoded"}
    _GAUGES = {"prefetch_beta_ppm", "prefetch_depth"}

    def assert_stats_agree(self, js, struct):
        """stats() (the JSON, taken first) and stats_struct() (taken after)
        carry every speckv_pool_stats field with the same values."""
        self.assertEqual(set(struct), set(speckv._STATS_FIELDS + speckv._STATS_FIELDS_U32
                                          + speckv._STATS_FIELDS_CODEC + speckv._STATS_FIELDS_L4))
        for k, v in struct.items():
            self.assertIn(k, js)
            if k in self._ASYNC:
                self.assertLessEqual(js[k], v, k)
            elif k not in self._GAUGES:
                self.assertEqual(js[k], v, k)
        self.assertLessEqual(struct["prefetch_beta_ppm"], 1000000)
        self.assertLessEqual(js["prefetch_beta_ppm"], 1000000)
        self.assertAlmostEqual(js["prefetch_beta"] * 1e6, js["prefetch_beta_ppm"], places=3)


class PoolTest(StatsAgree, unittest.TestCase):
    def setUp(self):
        self.pool = speckv.Pool("anon:?size=8M")

    def tearDown(self):
        self.pool.close()

    def test_version(self):
        n, s = speckv.library_version()
        speckv.check_version(n)
        self.assertEqual(speckv.version_text(n), s)

    def test_incompatible_major_is_refused(self):
        with self.assertRaises(speckv.VersionError) as cm:
            speckv.check_version(10000)
        self.assertEqual(cm.exception.code, -8)
        self.assertIn("1.0.0", cm.exception.message)
        self.assertIn("0.1.0", cm.exception.message)
        with self.assertRaises(speckv.VersionError):
            speckv.check_version(99)
        speckv.check_version(speckv.BINDING_VERSION_NUMBER + 3)

    def test_roundtrip_bytearray_memoryview(self):
        p = self.pool
        hint = speckv.Hint(tenant=1, request=2, layer=3, token_count=16)
        h = p.alloc(10000, speckv.FP16, hint)
        self.assertNotEqual(h, 0)
        data = pattern(5, 10000)
        p.write(h, 0, data)
        p.prefetch(hint)
        self.assertEqual(bytes(p.read(h, 0, 10000)), data)
        buf = bytearray(100)
        p.access(h, 4050, buf)
        self.assertEqual(bytes(buf), data[4050:4150])
        big = bytearray(200)
        p.access(h, 10, memoryview(big)[50:150])  # a slice, written in place
        self.assertEqual(bytes(big[50:150]), data[10:110])
        self.assertEqual(bytes(big[:50]), bytes(50))
        arr = array.array("H", [0] * 8)  # any writable buffer
        p.access(h, 0, arr)
        self.assertEqual(arr.tobytes(), data[:16])
        p.write(h, 0, memoryview(bytearray(b"xyz")))
        self.assertEqual(bytes(p.read(h, 0, 3)), b"xyz")
        data = b"xyz" + data[3:]
        self.assertEqual(p.block_size(h), 10000)
        with p.pin(h) as mv:
            self.assertTrue(mv.readonly)
            self.assertEqual(mv.nbytes, 10000)
            self.assertEqual(mv[:6].tobytes(), data[:6])
            with self.assertRaises(speckv.BusyError):
                p.write(h, 0, b"1")
            with self.assertRaises(speckv.BusyError):
                p.free(h)
        with self.assertRaises(ValueError):
            mv[0]  # released with the pin
        p.write(h, 0, b"1")  # unpinned again
        st = p.stats()
        self.assertIsInstance(st, dict)
        self.assertEqual(st["allocs"], 1)
        self.assertEqual(st["prefetch_hints"], 1)
        self.assertEqual(st["blocks_live"], 1)
        self.assert_stats_agree(st, p.stats_struct())
        self.assertEqual(p.stat("allocs"), 1)  # a counter by name
        self.assertEqual(p.stat("select_calls"), st["select_calls"])
        with self.assertRaises(speckv.SpeckvError):
            p.stat("no_such_counter")
        p.free(h)

    def test_fresh_block_reads_zero(self):
        h = self.pool.alloc(100, speckv.OPAQUE, speckv.Hint(content_hash=b"\x09" * 32))
        self.assertEqual(bytes(self.pool.read(h, 0, 100)), bytes(100))

    def test_bad_input(self):
        p = self.pool
        h = p.alloc(4096, speckv.FP32)
        with self.assertRaises(speckv.BadHandleError) as cm:
            p.write(0xDEADBEEF, 0, b"x")
        self.assertEqual(cm.exception.code, -6)
        self.assertTrue(cm.exception.message)
        self.assertIn("SPECKV_EBADHANDLE", str(cm.exception))
        with self.assertRaises(speckv.BadHandleError):
            p.free(0)
        with self.assertRaises(speckv.RangeError):
            p.write(h, 4000, bytes(200))
        with self.assertRaises(speckv.RangeError):
            p.access(h, 4095, bytearray(2))
        with self.assertRaises(speckv.RangeError):
            p.access(h, 2**64 - 1, bytearray(1))
        with self.assertRaises(speckv.InvalidError):
            p.alloc(0)
        with self.assertRaises(speckv.InvalidError):
            p.alloc(10, 9)
        with self.assertRaises(speckv.NoSpaceError):
            p.alloc(1 << 40)
        with self.assertRaises(speckv.InvalidError):
            p.access(h, 0, b"read-only")  # bytes is not writable
        # empty and None buffers are fine
        p.write(h, 0, b"")
        p.write(h, 0, None)
        p.access(h, 4096, bytearray())
        # double free
        p.free(h)
        with self.assertRaises(speckv.BadHandleError):
            p.free(h)
        with self.assertRaises(speckv.BadHandleError):
            p.read(h, 0, 1)

    def test_bad_uri_and_config(self):
        with self.assertRaises(speckv.URIError):
            speckv.Pool("bogus:x")
        with self.assertRaises(speckv.InvalidError):
            speckv.Pool("anon:\0")
        with self.assertRaises(speckv.NotFoundError):
            speckv.Pool("file:/nonexistent-dir/x.pool?create=0")
        with speckv.Config() as c:
            with self.assertRaises(speckv.NotFoundError):
                c.set("no.such.key", 1)
            with self.assertRaises(speckv.NotFoundError):
                c.load_toml("/nonexistent/speckv.toml")
            with speckv.Pool("anon:?size=8M", c) as p2:
                p2.alloc(1)
        with self.assertRaises(speckv.NotFoundError):
            speckv.Config.bounds("no.such.key")

    def test_every_code_maps_to_a_class(self):
        for code in range(-1, -19, -1):
            e = speckv.error_for(code, "m")
            self.assertIsInstance(e, speckv.SpeckvError)
            self.assertIsNot(type(e), speckv.SpeckvError, code)
            self.assertEqual(e.code, code)
        self.assertIs(type(speckv.error_for(-99, "m")), speckv.SpeckvError)

    def test_close_waits_for_calls_in_flight(self):
        p = speckv.Pool("anon:?size=8M")
        h = p.alloc(1 << 20)
        stop = threading.Event()
        seen = []

        def reader():
            buf = bytearray(1 << 20)
            while not stop.is_set():
                try:
                    p.access(h, 0, buf)
                except speckv.InvalidError:  # closed: the only allowed failure
                    seen.append("closed")
                    return

        ts = [threading.Thread(target=reader) for _ in range(3)]
        for t in ts:
            t.start()
        p.close()
        stop.set()
        for t in ts:
            t.join()
        self.assertTrue(all(s == "closed" for s in seen))

    def test_closed_pool(self):
        p = speckv.Pool("anon:?size=8M")
        p.close()
        p.close()
        with self.assertRaises(speckv.InvalidError):
            p.alloc(1)

    def test_threads(self):
        p = self.pool
        errors = []

        def work(seed):
            try:
                for _ in range(20):
                    h = p.alloc(3000)
                    d = pattern(seed, 3000)
                    p.write(h, 0, d)
                    assert bytes(p.read(h, 0, 3000)) == d
                    p.free(h)
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(p.stats()["blocks_live"], 0)

    def test_replay(self):
        trace = """
        # a tiny engine trace
        alloc k0 8192 fp16 1 0 0 16
        alloc v0 8192 fp16 1 0 0 16
        write k0 0 8192 3
        write v0 0 100 4
        prefetch 1 0 16
        access k0 0 8192
        access v0 50 50
        free v0
        """.splitlines()
        r = speckv.replay(self.pool, trace)
        self.assertEqual(r["ops"], {"alloc": 2, "write": 2, "prefetch": 1, "access": 2, "free": 1})
        self.assertEqual(r["bytes_written"], 8292)
        self.assertEqual(list(r["live_blocks"]), ["k0"])
        with self.assertRaises(speckv.RangeError) as cm:
            speckv.replay(self.pool, ["alloc a 10", "write a 5 10"])
        self.assertIn("trace line 2", str(cm.exception))
        with self.assertRaises(speckv.InvalidError):
            speckv.replay(self.pool, ["frobnicate"])


# An independent encoder of the two block hashes, written from
# docs/sharing.md with hashlib: the binding must give the same bytes.
def _cbor_head(major, v):
    if v < 24:
        return bytes([major << 5 | v])
    for info, fmt in ((24, ">B"), (25, ">H"), (26, ">I"), (27, ">Q")):
        if v < 1 << (8 * struct.calcsize(fmt)):
            return bytes([major << 5 | info]) + struct.pack(fmt, v)
    raise ValueError(v)


def ref_native(tenant, parent, tokens, extra):
    m = b"speckv-block-v1\0" + struct.pack("<Q", tenant)
    m += (b"\1" + parent) if parent is not None else b"\0"
    m += struct.pack("<Q", len(tokens)) + b"".join(struct.pack("<I", t) for t in tokens)
    extra = extra or b""
    return hashlib.sha256(m + struct.pack("<Q", len(extra)) + extra).digest()


def ref_vllm(parent, tokens, extra):
    m = _cbor_head(4, 3)
    m += (_cbor_head(2, len(parent)) + parent) if parent is not None else b"\xf6"
    m += _cbor_head(4, len(tokens)) + b"".join(_cbor_head(0, t) for t in tokens)
    return hashlib.sha256(m + (extra if extra is not None else b"\xf6")).digest()


CBOR_LORA7 = bytes([0x82, 0x66]) + b"lora-7" + bytes([0x03])  # ["lora-7", 3]


class SharingTest(StatsAgree, unittest.TestCase):
    def setUp(self):
        self.pool = speckv.Pool("anon:?size=8M")

    def tearDown(self):
        self.pool.close()

    def test_block_hash_matches_an_independent_encoder_and_chains(self):
        toks = [(i * 2654435761) % 128256 for i in range(48)] + [0, 23, 24, 255, 256, 65535, 65536, 2**32 - 1]
        for algo, extra in ((speckv.HASH_NATIVE, None), (speckv.HASH_NATIVE, b"model"),
                            (speckv.HASH_VLLM_CBOR, None), (speckv.HASH_VLLM_CBOR, CBOR_LORA7)):
            parent = None
            for b in range(0, len(toks), 16):
                block = toks[b:b + 16]
                h = speckv.block_hash(block, parent, extra=extra, algo=algo, tenant=7)
                self.assertIsInstance(h, bytes)
                self.assertEqual(len(h), speckv.HASH_BYTES)
                want = ref_native(7, parent, block, extra) if algo == speckv.HASH_NATIVE else ref_vllm(parent, block, extra)
                self.assertEqual(h.hex(), want.hex(), (algo, extra, b))
                # deterministic, whatever the token container
                self.assertEqual(speckv.block_hash(array.array("L", block), parent, extra=extra, algo=algo, tenant=7), h)
                parent = h
        # Known answers (the same constants as the Rust and Go tests).
        n0 = speckv.block_hash([1, 2, 3], tenant=7)
        self.assertEqual(n0.hex(), "47afdf9567455994c77156d8c56c7a1b3281af4f1263f73e7397381867b64f3c")
        self.assertEqual(speckv.block_hash([4, 5, 6], n0, extra=b"model", tenant=7).hex(),
                         "dc2a339e6ddaa8eeb190a8c5cf5b816330a1967e1c27fa9fc4028bbb0014d38d")
        v0 = speckv.block_hash([1, 2, 3], algo=speckv.HASH_VLLM_CBOR)
        self.assertEqual(v0.hex(), "9ca3c050dcab71b7d20d7e21acb28a035ce8f2f5470d3f9724580ec57b7c7da0")
        self.assertEqual(speckv.block_hash([4, 5, 6], v0, extra=CBOR_LORA7, algo=speckv.HASH_VLLM_CBOR).hex(),
                         "cc132b6b8db3b5db424d12733484912b37aade6cd8c2e2e83f5eb9a9fbbbf4e3")
        # The tenant salts the native hash only; the parent always counts.
        self.assertNotEqual(speckv.block_hash([1, 2, 3], tenant=8), n0)
        self.assertEqual(speckv.block_hash([1, 2, 3], algo=speckv.HASH_VLLM_CBOR, tenant=8), v0)
        self.assertNotEqual(speckv.block_hash([1, 2, 3], n0, tenant=7), n0)
        self.assertEqual(len(speckv.block_hash([])), 32)
        # Bad input.
        with self.assertRaises(speckv.InvalidError):
            speckv.block_hash([1], extra=b"\x82\x01", algo=speckv.HASH_VLLM_CBOR)  # malformed CBOR
        with self.assertRaises(speckv.InvalidError):
            speckv.block_hash([1], algo=9)
        with self.assertRaises(speckv.InvalidError):
            speckv.block_hash([2**32])
        with self.assertRaises(speckv.InvalidError):
            speckv.block_hash([-1])
        with self.assertRaises(speckv.InvalidError):
            speckv.block_hash([1], parent=b"short")
        with self.assertRaises(speckv.InvalidError):
            speckv.block_hash([1], parent=32)  # not 32 zero bytes
        with self.assertRaises(speckv.InvalidError):
            speckv.block_hash([1], extra="model")  # str: encode it yourself

    def filled(self, tenant, seed):
        h = self.pool.alloc(6000, speckv.FP16, speckv.Hint(tenant=tenant, token_count=16))
        self.pool.write(h, 0, pattern(seed, 6000))
        return h

    def test_publish_lookup_and_references(self):
        p = self.pool
        hash_ = speckv.block_hash([10, 11, 12, 13], tenant=3)
        self.assertIsNone(p.lookup(3, hash_))
        a = self.filled(3, 1)
        self.assertEqual(p.publish(a, hash_), speckv.Published(a, False))
        # Published blocks are immutable, and publish only once.
        with self.assertRaises(speckv.PermError):
            p.write(a, 0, b"x")
        with self.assertRaises(speckv.PermError):
            p.publish(a, hash_)
        # Same tenant: found, with the first block's bytes. Other tenant: never.
        self.assertEqual(p.lookup(3, hash_), a)
        self.assertEqual(bytes(p.read(a, 0, 6000)), pattern(1, 6000))
        self.assertIsNone(p.lookup(4, hash_))
        # A second writer of the same content gets the first block back.
        b = self.filled(3, 1)
        r = p.publish(b, bytearray(hash_))
        self.assertTrue(r.existed)
        self.assertEqual(r.handle, a)
        p.free(b)  # still unpublished, still ours
        with self.assertRaises(speckv.BadHandleError):
            p.read(b, 0, 1)
        st = p.stats()
        self.assertEqual((st["blocks_published"], st["shared_bytes"]), (1, 6000))
        self.assertEqual((st["lookups"], st["lookup_hits"], st["dedup_bytes"]), (3, 1, 2 * 6000))
        self.assert_stats_agree(st, p.stats_struct())
        # Three references (publish, lookup, collision): three frees; the
        # block stays published and findable.
        for _ in range(3):
            p.free(a)
        with self.assertRaises(speckv.BadHandleError):
            p.free(a)
        self.assertEqual(p.lookup(3, hash_), a)
        p.free(a)
        with self.assertRaises(speckv.InvalidError):
            p.lookup(3, b"\0" * 16)

    def test_published_block_is_found_from_another_pool(self):
        with tempfile.TemporaryDirectory() as d:
            uri = "file:%s?size=8M" % os.path.join(d, "share.pool")
            hash_ = speckv.block_hash([1, 2, 3], extra=CBOR_LORA7, algo=speckv.HASH_VLLM_CBOR)
            with speckv.Pool(uri) as p:
                h = p.alloc(6000, speckv.FP16, speckv.Hint(tenant=9))
                p.write(h, 0, pattern(4, 6000))
                self.assertEqual(p.publish(h, hash_).handle, h)
            # A separate process, as another engine would be.
            code = ("import speckv, sys\n"
                    "with speckv.Pool(sys.argv[1]) as p:\n"
                    "    h = p.lookup(9, bytes.fromhex(sys.argv[2]))\n"
                    "    print(h, p.lookup(1, bytes.fromhex(sys.argv[2])), bytes(p.read(h, 0, 8)).hex())\n")
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
            r = subprocess.run([sys.executable, "-c", code, uri, hash_.hex()], capture_output=True, text=True, env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.split(), [str(h), "None", pattern(4, 8).hex()])

    def test_tenant_quota(self):
        p = self.pool
        page = p.stats()["page_size"]
        self.assertEqual(p.tenant_usage(5), speckv.TenantUsage(0, 0))
        p.set_tenant_quota(5, 2)
        a = p.alloc(2 * page, speckv.OPAQUE, speckv.Hint(tenant=5))
        with self.assertRaises(speckv.QuotaError) as cm:
            p.alloc(1, speckv.OPAQUE, speckv.Hint(tenant=5))
        self.assertEqual(cm.exception.code, -18)
        self.assertIn("SPECKV_EQUOTA", str(cm.exception))
        other = p.alloc(page, speckv.OPAQUE, speckv.Hint(tenant=6))  # other tenants are not capped
        self.assertEqual(p.tenant_usage(5), (2, 2))
        p.free(a)
        p.set_tenant_quota(5, 0)  # no cap
        big = p.alloc(3 * page, speckv.OPAQUE, speckv.Hint(tenant=5))
        self.assertEqual(p.tenant_usage(5).pages_used, 3)
        self.assertEqual(p.tenant_usage(5).max_pages, 0)
        p.free(big)
        p.free(other)


class LoadTest(unittest.TestCase):
    @unittest.skipUnless(os.environ.get("SPECKV_FAKE_LIB"), "SPECKV_FAKE_LIB (a stub libspeckv 1.0.0) not set")
    def test_library_of_another_major_is_refused(self):
        # A fresh interpreter: this one has the real library loaded already.
        code = ("import speckv, sys\n"
                "try:\n    speckv.load(sys.argv[1])\n"
                "except speckv.VersionError as e:\n    print(e.code, e.message); sys.exit(3)\n")
        r = subprocess.run([sys.executable, "-c", code, os.environ["SPECKV_FAKE_LIB"]],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
        self.assertIn("-8", r.stdout)
        self.assertIn("1.0.0", r.stdout)
        self.assertIn("0.1.0", r.stdout)

    def test_missing_library(self):
        code = ("import speckv, sys\n"
                "try:\n    speckv.load('/nonexistent/libspeckv.so.0')\n"
                "except speckv.NotFoundError as e:\n    sys.exit(3)\n")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)


class TierTest(StatsAgree, unittest.TestCase):
    def setUp(self):
        self.pool = speckv.Pool("anon:?size=8M")

    def tearDown(self):
        self.pool.close()

    def test_translate(self):
        p = self.pool
        h = p.alloc(16 * 256, speckv.FP16,
                    speckv.Hint(tenant=4, request=11, layer=2, token_pos=16, token_count=16))
        self.assertEqual(p.translate(4, 11, 2, 20), (h, 4))
        self.assertEqual(p.translate(4, 11, 2, 20), (h, 4))  # again: from the TLB
        self.assertEqual(p.translate(4, 11, 2, 16), (h, 0))
        self.assertEqual(p.translate(4, 11, 2, 31), (h, 15))
        # Outside the token range, or another tenant, request or layer: None.
        for args in ((4, 11, 2, 40), (4, 11, 2, 32), (4, 11, 2, 15), (5, 11, 2, 20), (4, 12, 2, 20),
                     (4, 11, 3, 20)):
            self.assertIsNone(p.translate(*args), args)
        # Out-of-range arguments are refused, not truncated into another block's.
        for args in ((4, 11, 2 + (1 << 32), 20), (-1, 11, 2, 20), (4, 11, 2, 1 << 64), (4, 11, 2.0, 20)):
            with self.assertRaises(speckv.InvalidError):
                p.translate(*args)
        st = p.stats()
        self.assertGreaterEqual(st["tlb_hits"], 1, st)
        self.assertGreaterEqual(st["tlb_misses"], 1, st)
        self.assertTrue(0 < st["tlb_hit_rate"] < 1, st)
        self.assert_stats_agree(st, p.stats_struct())
        # A freed block is never returned, not even from the TLB.
        p.free(h)
        self.assertIsNone(p.translate(4, 11, 2, 20))
        self.assertIsNone(p.translate(4, 11, 2, 16))
        p.close()
        with self.assertRaises(speckv.SpeckvError):
            p.translate(4, 11, 2, 20)

    def test_tier_and_prefetch_stats(self):
        p = self.pool
        hint = speckv.Hint(request=1, token_count=16)
        h = p.alloc(3 * 4096, speckv.FP16, hint)
        data = pattern(3, 3 * 4096)
        p.write(h, 0, data)
        p.prefetch(hint)
        p.prefetch(speckv.Hint(request=999, layer=5))  # nothing allocated for it: ignored, counted
        self.assertEqual(bytes(p.read(h, 0, len(data))), data)
        self.assertEqual(p.translate(0, 1, 0, 3), (h, 3))
        # The prefetcher runs on its own thread: wait until it saw both hints.
        for _ in range(200):
            st = p.stats()
            if st["prefetch_ignored"] >= 1:
                break
            time.sleep(0.01)
        self.assertGreaterEqual(st["prefetch_ignored"], 1, st)
        self.assertEqual(st["prefetch_hints"], 2)
        self.assertGreaterEqual(st["cache_hits"] + st["l2_hits"] + st["sync_reads"], 3, st)
        for k in ("hit_rate", "precision", "tlb_hit_rate"):
            self.assertTrue(0 <= st[k] <= 1, (k, st))
        self.assert_stats_agree(st, p.stats_struct())

    def test_stats_struct_layout(self):
        # speckv_pool_stats on LP64: struct_size, 34 uint64_t, 2 uint32_t, 5 uint64_t (codec),
        # 5 uint64_t (L4).
        S = speckv._Stats
        self.assertEqual(ctypes.sizeof(S), 368)
        self.assertEqual((S.l2_hits.offset, S.tlb_misses.offset), (192, 272))
        self.assertEqual((S.prefetch_beta_ppm.offset, S.prefetch_depth.offset), (280, 284))
        self.assertEqual([getattr(S, f).offset for f in speckv._STATS_FIELDS_CODEC],
                         [288, 296, 304, 312, 320])
        self.assertEqual([getattr(S, f).offset for f in speckv._STATS_FIELDS_L4],
                         [328, 336, 344, 352, 360])
        self.assertEqual((speckv.HINT_HAS_HASH, speckv.HINT_KEYS, speckv.HINT_VALUES, speckv.HINT_SPAN), (0x1, 0x2, 0x4, 0x8))


def sine_fp16():
    """2048 FP16 values of a sine wave (amplitude 1, not all equal): 4096 bytes."""
    return struct.pack("<2048e", *(math.sin(i * 0.05) for i in range(2048)))


class CodecTest(StatsAgree, unittest.TestCase):
    def roundtrip(self, settings, flags=0):
        """Opens an anon pool with settings, writes the sine wave into a fresh
        4096-byte FP16 block allocated with flags; returns (written, read back,
        stats(), stats_struct()) taken after the read."""
        with speckv.Config() as cfg:
            for k, v in settings.items():
                cfg.set(k, v)
            with speckv.Pool("anon:?size=16M", cfg) as p:
                h = p.alloc(4096, speckv.FP16, speckv.Hint(flags=flags))
                data = sine_fp16()
                self.assertEqual(len(data), 4096)
                p.write(h, 0, data)
                back = bytes(p.read(h, 0, 4096))
                js, st = p.stats(), p.stats_struct()
                self.assert_stats_agree(js, st)
                p.free(h)
        return data, back, js, st

    def test_int8_stores_pages_compressed_and_reads_back_lossy(self):
        data, back, js, st = self.roundtrip({"codec.mode": "int8"})
        for s in (js, st):
            self.assertEqual(s["codec_pages_encoded"], 1, s)
            self.assertEqual(s["codec_raw_bytes"], 4096, s)
            self.assertGreater(s["codec_stored_bytes"], 0, s)
            self.assertLess(s["codec_stored_bytes"], s["codec_raw_bytes"], s)
            self.assertEqual(s["codec_pages_bypassed"], 0, s)
        self.assertAlmostEqual(js["codec_ratio"], 4096 / st["codec_stored_bytes"], places=5)
        wrote = struct.unpack("<2048e", data)
        read = struct.unpack("<2048e", back)
        for i, (x, y) in enumerate(zip(wrote, read)):
            self.assertTrue(math.isfinite(y) and abs(x - y) <= 0.02, "value %d: wrote %r read %r" % (i, x, y))
        differ = sum(a != b for a, b in zip(struct.unpack("<2048H", data), struct.unpack("<2048H", back)))
        self.assertGreater(differ, 0, "int8 read back every value bitwise identical: not coded")

    def test_raw_reads_back_exactly(self):
        for settings in ({"codec.mode": "raw"}, {}):  # explicit, and the default
            data, back, js, st = self.roundtrip(settings)
            self.assertEqual(back, data)
            self.assertEqual((st["codec_pages_encoded"], st["codec_raw_bytes"], st["codec_stored_bytes"]),
                             (0, 0, 0), st)
            self.assertEqual(js["codec_ratio"], 0)

    def test_key_and_value_modes_follow_the_hint_flags(self):
        keys = {"codec.mode": "raw", "codec.key_mode": "int8"}
        data, back, _, st = self.roundtrip(keys, speckv.HINT_KEYS)
        self.assertEqual(st["codec_pages_encoded"], 1, st)
        self.assertNotEqual(back, data)
        data, back, _, st = self.roundtrip(keys, speckv.HINT_VALUES)
        self.assertEqual(st["codec_pages_encoded"], 0, st)
        self.assertEqual(back, data)
        _, _, _, st = self.roundtrip({"codec.value_mode": "int8"}, speckv.HINT_VALUES)
        self.assertEqual(st["codec_pages_encoded"], 1, st)
        # HINT_HAS_HASH follows content_hash, whatever flags say.
        self.assertEqual(speckv.Hint(flags=speckv.HINT_HAS_HASH | speckv.HINT_KEYS)._raw().flags, speckv.HINT_KEYS)
        self.assertEqual(speckv.Hint(flags=speckv.HINT_VALUES, content_hash=bytes(32))._raw().flags,
                         speckv.HINT_VALUES | speckv.HINT_HAS_HASH)
        with self.assertRaises(speckv.InvalidError):
            speckv.Hint(flags=1 << 32)._raw()

    def test_config_keys(self):
        with speckv.Config() as cfg:
            for m in ("raw", "paper", "int8", "k6", "vp6"):
                for k in ("codec.mode", "codec.key_mode", "codec.value_mode"):
                    cfg.set(k, m)
            with self.assertRaises(speckv.InvalidError):
                cfg.set("codec.mode", "zstd-99")
            cfg.set("codec.channels", 128)
            self.assertEqual(cfg.get("codec.channels"), 128)
            self.assertEqual(speckv.Config.bounds("codec.channels"), (1, 65535, 1))
            for bad in (0, 65536):
                with self.assertRaises(speckv.InvalidError):
                    cfg.set("codec.channels", bad)


class ColdTierTest(StatsAgree, unittest.TestCase):
    """The L4 cold tier (docs/tiers.md section 9): speckv_demote and the l4_* stats."""

    def setUp(self):
        self._dir = tempfile.TemporaryDirectory()
        self.dir = self._dir.name

    def tearDown(self):
        self._dir.cleanup()

    def test_demote_moves_a_block_to_l4_and_a_read_brings_it_back(self):
        with speckv.Config() as cfg:
            cfg.set("cold.path", os.path.join(self.dir, "py.l4"))
            cfg.set("cold.batch", 4)
            with self.assertRaises(speckv.InvalidError):
                cfg.set("cold.path", 1)  # a text key: refused as an integer
            pool = speckv.Pool("file:%s?size=4M" % os.path.join(self.dir, "py.pool"), cfg)
        with pool as p:
            data = pattern(77, 10000)
            h = p.alloc(len(data))
            p.write(h, 0, data)
            before = p.stats_struct()
            self.assertEqual([before[k] for k in speckv._STATS_FIELDS_L4], [0] * 5, before)

            p.demote(h)
            p.demote(h)  # in L4 already: no error
            js, st = p.stats(), p.stats_struct()
            self.assert_stats_agree(js, st)
            self.assertIs(js["l4_holder"], True)
            for s in (js, st):
                self.assertEqual(s["l4_blocks"], 1, s)
                self.assertEqual(s["l4_bytes"], len(data), s)
                self.assertEqual(s["l4_demotions"], 1, s)
                self.assertEqual(s["l4_promotions"], 0, s)
                self.assertEqual(s["l4_demote_failures"], 0, s)
            self.assertLess(st["pages_used"], before["pages_used"], "the block's pages are freed")
            self.assertEqual(p.block_size(h), len(data))  # metadata stays in the pool

            self.assertEqual(bytes(p.read(h, 0, len(data))), data)
            js, st = p.stats(), p.stats_struct()
            self.assert_stats_agree(js, st)
            for s in (js, st):
                self.assertEqual(s["l4_promotions"], 1, s)
                self.assertEqual(s["l4_blocks"], 0, s)
                self.assertEqual(s["l4_bytes"], 0, s)
                self.assertEqual(s["l4_demotions"], 1, s)
            with p.pin(h):
                with self.assertRaises(speckv.BusyError):
                    p.demote(h)  # pinned: it cannot move
            p.free(h)
            with self.assertRaises(speckv.BadHandleError):
                p.demote(h)

    def test_demote_without_cold_path_is_not_supported(self):
        with speckv.Pool("file:%s?size=4M" % os.path.join(self.dir, "py.pool")) as p:
            data = pattern(1, 5000)
            h = p.alloc(len(data))
            p.write(h, 0, data)
            with self.assertRaises(speckv.NotSupportedError) as cm:
                p.demote(h)
            self.assertEqual(cm.exception.code, -15)
            self.assertIsInstance(cm.exception, NotImplementedError)
            self.assertIn("cold.path", cm.exception.message)
            js = p.stats()
            self.assertIs(js["l4_holder"], False)
            self.assertEqual((js["l4_blocks"], js["l4_demotions"]), (0, 0), js)
            self.assertEqual(bytes(p.read(h, 0, len(data))), data)
        with self.assertRaises(speckv.SpeckvError):
            p.demote(h)  # closed

    def test_stats_of_the_older_layouts_are_still_accepted(self):
        # struct_size of the layouts ending at codec_pages_decoded (328) and at
        # prefetch_depth (288): the library fills them and writes nothing past.
        lib = speckv.load()
        with speckv.Pool("anon:?size=4M") as p, p._use() as raw:
            for size, rc in ((368, 0), (328, 0), (288, 0), (320, -16), (376, -16)):
                s = speckv._Stats(struct_size=size, codec_pages_decoded=7, l4_blocks=7)
                self.assertEqual(lib.speckv_stats(raw, ctypes.byref(s)), rc, size)
                if rc == 0:
                    self.assertGreater(s.pool_bytes, 0, size)
                    self.assertEqual(s.l4_blocks, 0 if size == 368 else 7, size)
                    self.assertEqual(s.codec_pages_decoded, 7 if size == 288 else 0, size)


class FilePoolTest(unittest.TestCase):
    def test_reopen(self):
        with tempfile.TemporaryDirectory() as d:
            uri = "file:%s?size=8M" % os.path.join(d, "py.pool")
            data = pattern(42, 5000)
            with speckv.Pool(uri) as p:
                h = p.alloc(5000, speckv.BF16)
                p.write(h, 0, data)
            with speckv.Pool(uri) as p:
                self.assertEqual(bytes(p.read(h, 0, 5000)), data)


if __name__ == "__main__":
    unittest.main()


class LogTest(unittest.TestCase):
    def test_callback_gets_the_recovery_warning(self):
        """A process attaches and dies without closing: the next opener's log
        callback gets the recovery warning (LOG_WARN)."""
        with tempfile.TemporaryDirectory() as d:
            uri = "file:" + os.path.join(d, "log.pool") + "?size=8M"
            speckv.Pool(uri).close()
            pid = os.fork()
            if pid == 0:
                try:
                    keep = speckv.Pool(uri)  # noqa: F841 (unreferenced, it would close itself)
                finally:
                    os._exit(0)  # no close: the attach record stays, its process gone
            os.waitpid(pid, 0)
            got = []
            with speckv.Config() as cfg:
                cfg.set_log(lambda level, msg: got.append((level, msg)))
                with speckv.Pool(uri, cfg):
                    pass
            self.assertTrue(any(level == speckv.LOG_WARN and "recovering pool" in msg for level, msg in got), got)

    def test_none_removes_the_callback(self):
        got = []
        with speckv.Config() as cfg:
            cfg.set_log(lambda level, msg: got.append(msg))
            cfg.set_log(None)
            cfg.set("log.level", 3)
            with speckv.Pool("anon:?size=8M", cfg) as p:
                p.free(p.alloc(4096))
        self.assertEqual(got, [])
