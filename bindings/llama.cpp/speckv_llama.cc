// SPDX-License-Identifier: Apache-2.0
// The speckv prefix cache for libllama: see speckv_llama.h and docs/llamacpp.md
// (the sequence-state format parsed here, and the block format stored).
#include "speckv_llama.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "llama.h"

namespace {

constexpr uint32_t kStateMagic = 0xaf143cd8u;  // llama.cpp's io_magic (llama-context.cpp)
constexpr char kBlockMagic[8] = {'S', 'K', 'V', 'L', 'L', 'A', 'M', '1'};
constexpr uint32_t kBlockVersion = 1;       // header, tokens, layout, K rows, V rows: one pool block
constexpr uint32_t kBlockVersionSplit = 2;  // header, tokens, layout; K and V rows in two typed blocks
constexpr int32_t kGgmlF32 = 0, kGgmlF16 = 1, kGgmlBf16 = 30;  // ggml_type values (ggml.h)

// One layer's rows as llama.cpp writes them. v_row: bytes of one V row
// (v_trans 0) or of one element (v_trans 1); v_embd: V elements per token
// when transposed, else 0.
struct LayerFmt {
    int32_t k_type;
    uint32_t pad;
    uint64_t k_row;
    int32_t v_type;
    uint32_t v_embd;
    uint64_t v_row;
    bool operator==(const LayerFmt &o) const {
        return k_type == o.k_type && k_row == o.k_row && v_type == o.v_type && v_embd == o.v_embd &&
               v_row == o.v_row;
    }
};
static_assert(sizeof(LayerFmt) == 32);

struct Layout {
    uint32_t v_trans = 0;
    std::vector<LayerFmt> layers;
    bool operator==(const Layout &o) const { return v_trans == o.v_trans && layers == o.layers; }
    uint64_t k_bytes(size_t l) const { return layers[l].k_row; }
    uint64_t v_bytes(size_t l) const {  // V bytes of one token in layer l
        return v_trans ? layers[l].v_row * layers[l].v_embd : layers[l].v_row;
    }
    uint64_t token_bytes() const {
        uint64_t t = 0;
        for (size_t l = 0; l < layers.size(); ++l) t += k_bytes(l) + v_bytes(l);
        return t;
    }
};

// The stored block: header, its tokens, the layout, then per layer the K rows
// of its tokens, then per layer the V rows (transposed V: per element index,
// the block's tokens' elements).
struct BlockHeader {
    char magic[8];
    uint32_t version;
    uint32_t block_tokens;
    uint32_t n_layer;
    uint32_t v_trans;
    uint64_t payload_bytes;
    uint64_t block_index;
    uint8_t key[SPECKV_HASH_BYTES];
};
static_assert(sizeof(BlockHeader) == 72);

// A parsed sequence state: where each piece lies in the buffer.
struct Parsed {
    Layout layout;
    uint32_t n_stream = 0;
    uint32_t cell_count = 0;
    std::vector<int32_t> cell_pos;       // per cell (state order)
    std::vector<const uint8_t *> k_data; // per layer: cell_count rows
    std::vector<const uint8_t *> v_data; // per layer: cell_count rows, or v_embd x cell_count elements
};

struct Reader {
    const uint8_t *p, *end;
    bool ok = true;
    template <class T> T get() {
        T v{};
        if ((size_t)(end - p) < sizeof(T)) { ok = false; return v; }
        std::memcpy(&v, p, sizeof(T));
        p += sizeof(T);
        return v;
    }
    const uint8_t *skip(uint64_t n) {
        if (!ok || (uint64_t)(end - p) < n) { ok = false; return nullptr; }
        const uint8_t *q = p;
        p += n;
        return q;
    }
};

bool mul_ok(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_mul_overflow(a, b, out); }

// The pool dtype that lets the codec see one ggml cache type, or OPAQUE.
int32_t pool_dtype(int32_t ggml_type) {
    switch (ggml_type) {
    case kGgmlF16: return SPECKV_DTYPE_FP16;
    case kGgmlBf16: return SPECKV_DTYPE_BF16;
    case kGgmlF32: return SPECKV_DTYPE_FP32;
    default: return SPECKV_DTYPE_OPAQUE;
    }
}

// The K (or V) dtype of a layout when every layer shares one codec-able type.
int32_t layout_dtype(const Layout &L, bool keys) {
    int32_t d = SPECKV_DTYPE_OPAQUE;
    for (size_t l = 0; l < L.layers.size(); ++l) {
        int32_t dl = pool_dtype(keys ? L.layers[l].k_type : L.layers[l].v_type);
        if (dl == SPECKV_DTYPE_OPAQUE || (l && dl != d)) return SPECKV_DTYPE_OPAQUE;
        d = dl;
    }
    return d;
}

// Where a restore's block stands.
enum class Got { ok, missing, bad };

}  // namespace

struct speckv_llama {
    speckv_pool *pool;
    llama_context *ctx;
    uint64_t tenant;
    uint32_t block_tokens;
    uint32_t n_layer;
    uint32_t flags = 0;  // SPECKV_LLAMA_F_*
    std::vector<uint8_t> extra;
    Layout known;  // the context's layout, once a store or restore has seen it
    bool known_set = false;
    speckv_llama_stats st{};
    std::string err;
    // Scratch kept between calls: fresh multi-megabyte buffers cost page
    // faults on every restore (most of a restore's time on a 1B model).
    std::vector<std::vector<uint8_t>> blk_bufs;
    std::vector<uint8_t> state_buf;

    int fail(int code, std::string msg) {
        err = std::move(msg);
        return code;
    }
    int pool_fail(const char *what, int rc) {
        return fail(SPECKV_LLAMA_EPOOL, std::string(what) + ": " + speckv_strerror(rc) + " (" + speckv_errmsg() + ")");
    }

    // Parses llama_state_seq_get_data's bytes (docs/llamacpp.md "State format").
    int parse(const uint8_t *buf, size_t size, int32_t seq_id, Parsed &out) {
        Reader r{buf, buf + size};
        if (r.get<uint32_t>() != kStateMagic) return fail(SPECKV_LLAMA_EFORMAT, "sequence state: wrong magic");
        if (r.get<int32_t>() != seq_id) return fail(SPECKV_LLAMA_EFORMAT, "sequence state: wrong sequence id");
        out.n_stream = r.get<uint32_t>();
        if (!r.ok || out.n_stream == 0 || out.n_stream > 4096)
            return fail(SPECKV_LLAMA_EFORMAT, "sequence state: bad stream count");
        bool seen = false;
        for (uint32_t s = 0; s < out.n_stream; ++s) {
            uint32_t cells = r.get<uint32_t>();
            if (!r.ok) return fail(SPECKV_LLAMA_EFORMAT, "sequence state: truncated stream header");
            if (cells == 0) continue;
            if (seen) return fail(SPECKV_LLAMA_EFORMAT, "sequence state: cells in two streams");
            seen = true;
            out.cell_count = cells;
            out.cell_pos.resize(cells);
            for (uint32_t i = 0; i < cells; ++i) {
                int32_t pos = r.get<int32_t>();
                uint32_t nseq = r.get<uint32_t>();
                int32_t sid = r.get<int32_t>();
                if (!r.ok || nseq != 1 || sid != seq_id || pos < 0)
                    return fail(SPECKV_LLAMA_EFORMAT,
                                "sequence state: cell " + std::to_string(i) +
                                    " is not (pos, 1, seq_id): unsupported format (cell extensions?)");
                out.cell_pos[i] = pos;
            }
            Layout &L = out.layout;
            L.v_trans = r.get<uint32_t>();
            uint32_t nl = r.get<uint32_t>();
            if (!r.ok || L.v_trans > 1) return fail(SPECKV_LLAMA_EFORMAT, "sequence state: bad v_trans");
            if (nl != n_layer)
                return fail(SPECKV_LLAMA_EFORMAT, "sequence state: " + std::to_string(nl) + " layers, the model has " +
                                                      std::to_string(n_layer));
            L.layers.assign(nl, LayerFmt{});
            out.k_data.assign(nl, nullptr);
            out.v_data.assign(nl, nullptr);
            uint64_t n;
            for (uint32_t l = 0; l < nl; ++l) {
                L.layers[l].k_type = r.get<int32_t>();
                L.layers[l].k_row = r.get<uint64_t>();
                if (!r.ok || L.layers[l].k_row == 0 || !mul_ok(L.layers[l].k_row, cells, &n) ||
                    !(out.k_data[l] = r.skip(n)))
                    return fail(SPECKV_LLAMA_EFORMAT, "sequence state: bad K section of layer " + std::to_string(l));
            }
            for (uint32_t l = 0; l < nl; ++l) {
                L.layers[l].v_type = r.get<int32_t>();
                if (!L.v_trans) {
                    L.layers[l].v_row = r.get<uint64_t>();
                    L.layers[l].v_embd = 0;
                } else {
                    L.layers[l].v_row = r.get<uint32_t>();
                    L.layers[l].v_embd = r.get<uint32_t>();
                }
                if (!r.ok || L.layers[l].v_row == 0 || (L.v_trans && L.layers[l].v_embd == 0) ||
                    !mul_ok(L.v_bytes(l), cells, &n) || !(out.v_data[l] = r.skip(n)))
                    return fail(SPECKV_LLAMA_EFORMAT, "sequence state: bad V section of layer " + std::to_string(l));
            }
        }
        if (r.p != r.end)
            return fail(SPECKV_LLAMA_EFORMAT, "sequence state: " + std::to_string(r.end - r.p) +
                                                  " bytes after the KV cache (another memory kind?)");
        return SPECKV_LLAMA_OK;
    }

    int keys(const int32_t *tokens, size_t nblocks, std::vector<uint8_t> &out) {
        out.resize(nblocks * SPECKV_HASH_BYTES);
        for (size_t b = 0; b < nblocks; ++b) {
            int rc = speckv_block_hash(SPECKV_HASH_NATIVE, tenant, b ? &out[(b - 1) * SPECKV_HASH_BYTES] : nullptr,
                                       reinterpret_cast<const uint32_t *>(tokens + b * block_tokens), block_tokens,
                                       extra.data(), extra.size(), &out[b * SPECKV_HASH_BYTES]);
            if (rc != SPECKV_OK) return pool_fail("speckv_block_hash", rc);
        }
        return SPECKV_LLAMA_OK;
    }

    // The key of a split block's K (which 'K') or V ('V') piece: chained
    // from the block's key, so it is as private to the tenant and model.
    int piece_key(const uint8_t *key, char which, uint8_t out[SPECKV_HASH_BYTES]) {
        const char tag[] = {'s', 'k', 'v', '-', 'l', 'l', 'a', 'm', 'a', '/', which};
        int rc = speckv_block_hash(SPECKV_HASH_NATIVE, tenant, key, nullptr, 0, tag, sizeof tag, out);
        return rc == SPECKV_OK ? SPECKV_LLAMA_OK : pool_fail("speckv_block_hash", rc);
    }

    // Allocates, writes and publishes one pool block; *present when another
    // writer published it first. Our reference is dropped either way.
    int put_block(const uint8_t *data, size_t size, int32_t dtype, uint32_t hint_flags, int32_t seq_id, size_t b,
                  const uint8_t *key, bool *present) {
        speckv_hint hint{};
        hint.struct_size = sizeof hint;
        hint.tenant = tenant;
        hint.request = (uint64_t)seq_id;
        hint.flags = SPECKV_HINT_HAS_HASH | hint_flags;
        hint.token_pos = b * block_tokens;
        hint.token_count = block_tokens;
        std::memcpy(hint.content_hash, key, SPECKV_HASH_BYTES);
        speckv_handle h = 0;
        int rc = speckv_alloc(pool, size, dtype, &hint, &h);
        if (rc != SPECKV_OK) return pool_fail("speckv_alloc", rc);
        rc = speckv_write(pool, h, 0, data, size);
        if (rc != SPECKV_OK) {
            speckv_free(pool, h);
            return pool_fail("speckv_write", rc);
        }
        speckv_handle canon = 0;
        rc = speckv_publish(pool, h, key, &canon);
        *present = rc == SPECKV_EEXIST;
        if (rc == SPECKV_EEXIST) speckv_free(pool, canon);  // another process stored it meanwhile
        speckv_free(pool, h);  // the block stays published, and evictable
        return rc == SPECKV_OK || rc == SPECKV_EEXIST ? SPECKV_LLAMA_OK : pool_fail("speckv_publish", rc);
    }

    // Reads the K or V piece of split block b into dst (exactly `size` bytes).
    Got read_piece(size_t b, const uint8_t *key, char which, uint8_t *dst, uint64_t size) {
        uint8_t pk[SPECKV_HASH_BYTES];
        if (piece_key(key, which, pk) != SPECKV_LLAMA_OK) return Got::bad;
        speckv_handle h = 0;
        int rc = speckv_lookup(pool, tenant, pk, &h);
        if (rc == SPECKV_ENOENT) return Got::missing;  // evicted on its own: a miss, not damage
        if (rc != SPECKV_OK) {
            err = std::string("block ") + std::to_string(b) + " " + which + ": " + speckv_strerror(rc);
            return Got::bad;
        }
        speckv_block_meta meta{};
        meta.struct_size = sizeof meta;
        rc = speckv_block_info(pool, h, &meta);
        if (rc == SPECKV_OK && meta.bytes != size) rc = SPECKV_ECORRUPT;
        if (rc == SPECKV_OK) rc = speckv_access(pool, h, 0, dst, size, 0);
        speckv_free(pool, h);
        if (rc != SPECKV_OK) {
            err = std::string("block ") + std::to_string(b) + " " + which + ": " + speckv_strerror(rc) +
                  (meta.bytes != size ? " (size does not match its layout)" : "");
            return Got::bad;
        }
        return Got::ok;
    }

    int check_seq(int32_t seq_id) {
        if (seq_id < 0 || (uint32_t)seq_id >= llama_n_seq_max(ctx))
            return fail(SPECKV_LLAMA_EINVAL, "sequence id " + std::to_string(seq_id) + " outside [0, " +
                                                 std::to_string(llama_n_seq_max(ctx)) + ")");
        return SPECKV_LLAMA_OK;
    }

    int restore(int32_t seq_id, const int32_t *tokens, size_t n, size_t *restored);
    int store(int32_t seq_id, const int32_t *tokens, size_t n, size_t *stored);
    // Reads and checks block b (and its K and V pieces when split) into buf.
    Got read_block(speckv_handle h, size_t b, const uint8_t *key, const int32_t *tokens, std::vector<uint8_t> &buf,
                   Layout &layout);
};

Got speckv_llama::read_block(speckv_handle h, size_t b, const uint8_t *key, const int32_t *tokens,
                             std::vector<uint8_t> &buf, Layout &layout) {
    speckv_block_meta meta{};
    meta.struct_size = sizeof meta;
    if (speckv_block_info(pool, h, &meta) != SPECKV_OK || meta.bytes < sizeof(BlockHeader) ||
        meta.bytes > (uint64_t)1 << 40)
        return Got::bad;
    buf.resize(meta.bytes);
    int rc = speckv_access(pool, h, 0, buf.data(), buf.size(), 0);
    if (rc != SPECKV_OK) {
        err = std::string("block ") + std::to_string(b) + ": " + speckv_strerror(rc) + " (" + speckv_errmsg() + ")";
        return Got::bad;
    }
    BlockHeader hd;
    std::memcpy(&hd, buf.data(), sizeof hd);
    size_t off = sizeof hd;
    size_t tok_bytes = (size_t)block_tokens * 4, lay_bytes = (size_t)n_layer * sizeof(LayerFmt);
    const bool split = hd.version == kBlockVersionSplit;
    if (std::memcmp(hd.magic, kBlockMagic, 8) != 0 || (hd.version != kBlockVersion && !split) ||
        hd.block_tokens != block_tokens || hd.n_layer != n_layer || hd.v_trans > 1 || hd.block_index != b ||
        std::memcmp(hd.key, key, SPECKV_HASH_BYTES) != 0 || buf.size() < off + tok_bytes + lay_bytes) {
        err = "block " + std::to_string(b) + ": bad header";
        return Got::bad;
    }
    if (std::memcmp(buf.data() + off, tokens + b * block_tokens, tok_bytes) != 0) {
        err = "block " + std::to_string(b) + ": tokens differ";
        return Got::bad;
    }
    off += tok_bytes;
    layout.v_trans = hd.v_trans;
    layout.layers.resize(n_layer);
    std::memcpy(layout.layers.data(), buf.data() + off, lay_bytes);
    off += lay_bytes;
    uint64_t per = 0, payload = 0;
    for (size_t l = 0; l < n_layer; ++l) {
        const LayerFmt &f = layout.layers[l];
        if (f.k_row == 0 || f.v_row == 0 || f.k_row > (1u << 30) || f.v_row > (1u << 30) ||
            (layout.v_trans ? (f.v_embd == 0 || f.v_embd > (1u << 20)) : f.v_embd != 0)) {
            err = "block " + std::to_string(b) + ": bad layout";
            return Got::bad;
        }
        per += layout.k_bytes(l) + layout.v_bytes(l);
    }
    payload = per * block_tokens;
    if (hd.payload_bytes != payload || buf.size() != off + (split ? 0 : payload)) {
        err = "block " + std::to_string(b) + ": size does not match its layout";
        return Got::bad;
    }
    if (known_set && !(layout == known)) {
        err = "block " + std::to_string(b) + ": layout differs from this context's";
        return Got::bad;
    }
    if (!split) return Got::ok;
    // The K and V pieces follow the header in buf, as in a whole block.
    uint64_t k_total = 0;
    for (size_t l = 0; l < n_layer; ++l) k_total += layout.k_bytes(l) * block_tokens;
    buf.resize(off + payload);
    Got g = read_piece(b, key, 'K', buf.data() + off, k_total);
    if (g == Got::ok) g = read_piece(b, key, 'V', buf.data() + off + k_total, payload - k_total);
    if (g != Got::ok) buf.resize(off);
    return g;
}

int speckv_llama::restore(int32_t seq_id, const int32_t *tokens, size_t n, size_t *restored) {
    *restored = 0;
    st.restores++;
    if (int rc = check_seq(seq_id)) return rc;
    if (n > 0 && !tokens) return fail(SPECKV_LLAMA_EINVAL, "tokens is NULL");
    if (n > llama_n_ctx_seq(ctx))
        return fail(SPECKV_LLAMA_ECTX, "prompt of " + std::to_string(n) + " tokens does not fit the context (" +
                                           std::to_string(llama_n_ctx_seq(ctx)) + " per sequence)");
    llama_memory_t mem = llama_get_memory(ctx);
    if (llama_memory_seq_pos_max(mem, seq_id) != -1)
        return fail(SPECKV_LLAMA_EBUSY, "sequence " + std::to_string(seq_id) + " already holds tokens");
    size_t want = n ? (n - 1) / block_tokens : 0;
    if (want == 0) return SPECKV_LLAMA_OK;
    std::vector<uint8_t> key;
    if (int rc = keys(tokens, want, key)) return rc;

    // The blocks of the longest cached prefix, checked.
    if (blk_bufs.size() < want) blk_bufs.resize(want);
    size_t nb = 0;
    Layout layout;
    for (size_t b = 0; b < want; ++b) {
        speckv_handle h = 0;
        int rc = speckv_lookup(pool, tenant, &key[b * SPECKV_HASH_BYTES], &h);
        if (rc == SPECKV_ENOENT) break;
        if (rc != SPECKV_OK) return pool_fail("speckv_lookup", rc);
        std::vector<uint8_t> &buf = blk_bufs[b];
        Layout lb;
        Got got = read_block(h, b, &key[b * SPECKV_HASH_BYTES], tokens, buf, lb);
        speckv_free(pool, h);
        if (got == Got::ok && b > 0 && !(lb == layout)) {
            got = Got::bad;
            err = "block " + std::to_string(b) + ": layout differs from block 0's";
        }
        if (got == Got::missing) break;  // a K or V piece was evicted: the prefix ends here
        if (got == Got::bad) {
            st.bad_blocks++;
            break;
        }
        if (b == 0) layout = lb;
        st.bytes_restored += buf.size();
        nb = b + 1;
    }
    if (nb == 0) return SPECKV_LLAMA_OK;
    const auto &blocks = blk_bufs;

    // The stream count: from this (empty) sequence's own state.
    size_t esz = llama_state_seq_get_size(ctx, seq_id);
    std::vector<uint8_t> empty(esz);
    if (esz < 12 || llama_state_seq_get_data(ctx, empty.data(), esz, seq_id) != esz)
        return fail(SPECKV_LLAMA_EFORMAT, "empty sequence state unreadable");
    uint32_t n_stream;
    std::memcpy(&n_stream, empty.data() + 8, 4);
    if (esz != 12 + 4ull * n_stream) return fail(SPECKV_LLAMA_EFORMAT, "empty sequence state has an unexpected size");

    // Assemble the sequence state of the prefix (docs/llamacpp.md).
    const size_t B = block_tokens, N = nb * B;
    const size_t hdr = sizeof(BlockHeader) + B * 4 + n_layer * sizeof(LayerFmt);
    size_t total = 12 + 4 + N * 12 + 8 + 4ull * (n_stream - 1);
    for (size_t l = 0; l < n_layer; ++l)
        total += 12 + N * layout.k_bytes(l) + (layout.v_trans ? 12 : 12) + N * layout.v_bytes(l);
    try {
        if (state_buf.size() < total) state_buf.resize(total);
    } catch (const std::bad_alloc &) {
        return fail(SPECKV_LLAMA_ENOMEM, "no memory for a " + std::to_string(total) + "-byte state");
    }
    uint8_t *const s = state_buf.data();
    uint8_t *w = s;
    auto put = [&](const void *p, size_t len) { std::memcpy(w, p, len); w += len; };
    uint32_t u32;
    int32_t i32;
    put(&kStateMagic, 4);
    put(&seq_id, 4);
    put(&n_stream, 4);
    u32 = (uint32_t)N;
    put(&u32, 4);
    for (size_t p = 0; p < N; ++p) {
        i32 = (int32_t)p;
        put(&i32, 4);
        u32 = 1;
        put(&u32, 4);
        put(&seq_id, 4);
    }
    put(&layout.v_trans, 4);
    put(&n_layer, 4);
    std::vector<size_t> k_off(n_layer), v_off(n_layer);
    size_t o = hdr;
    for (size_t l = 0; l < n_layer; ++l) { k_off[l] = o; o += B * layout.k_bytes(l); }
    for (size_t l = 0; l < n_layer; ++l) { v_off[l] = o; o += B * layout.v_bytes(l); }
    for (size_t l = 0; l < n_layer; ++l) {
        put(&layout.layers[l].k_type, 4);
        put(&layout.layers[l].k_row, 8);
        for (size_t b = 0; b < nb; ++b) put(blocks[b].data() + k_off[l], B * layout.k_bytes(l));
    }
    for (size_t l = 0; l < n_layer; ++l) {
        const LayerFmt &f = layout.layers[l];
        put(&f.v_type, 4);
        if (!layout.v_trans) {
            put(&f.v_row, 8);
            for (size_t b = 0; b < nb; ++b) put(blocks[b].data() + v_off[l], B * f.v_row);
        } else {
            u32 = (uint32_t)f.v_row;
            put(&u32, 4);
            put(&f.v_embd, 4);
            for (size_t j = 0; j < f.v_embd; ++j)
                for (size_t b = 0; b < nb; ++b) put(blocks[b].data() + v_off[l] + j * B * f.v_row, B * f.v_row);
        }
    }
    u32 = 0;
    for (uint32_t k = 1; k < n_stream; ++k) put(&u32, 4);
    if ((size_t)(w - s) != total) return fail(SPECKV_LLAMA_EFORMAT, "internal: state size mismatch");

    size_t rd = llama_state_seq_set_data(ctx, s, total, seq_id);
    if (rd != total) {
        llama_memory_seq_rm(mem, seq_id, -1, -1);
        st.fallbacks++;
        err = "llama.cpp refused the restored state (read " + std::to_string(rd) + " of " + std::to_string(total) +
              " bytes): recomputing";
        return SPECKV_LLAMA_OK;
    }
    if (llama_memory_seq_pos_max(mem, seq_id) != (llama_pos)N - 1) {
        llama_memory_seq_rm(mem, seq_id, -1, -1);
        st.fallbacks++;
        err = "restored sequence does not end at position " + std::to_string(N - 1) + ": recomputing";
        return SPECKV_LLAMA_OK;
    }
    known = layout;
    known_set = true;
    st.blocks_restored += nb;
    st.tokens_restored += N;
    *restored = N;
    return SPECKV_LLAMA_OK;
}

int speckv_llama::store(int32_t seq_id, const int32_t *tokens, size_t n, size_t *stored) {
    if (stored) *stored = 0;
    if (int rc = check_seq(seq_id)) return rc;
    if (n > 0 && !tokens) return fail(SPECKV_LLAMA_EINVAL, "tokens is NULL");
    const size_t nb = n / block_tokens, B = block_tokens;
    if (nb == 0) return SPECKV_LLAMA_OK;
    llama_memory_t mem = llama_get_memory(ctx);
    if (llama_memory_seq_pos_max(mem, seq_id) < (llama_pos)(nb * B) - 1)
        return fail(SPECKV_LLAMA_EINVAL, "sequence " + std::to_string(seq_id) + " does not hold positions 0.." +
                                             std::to_string(nb * B - 1));
    std::vector<uint8_t> key;
    if (int rc = keys(tokens, nb, key)) return rc;
    // Split blocks (SPECKV_LLAMA_F_CODEC) are present only with both pieces:
    // the pool evicts the three pool blocks independently.
    const bool want_split = (flags & SPECKV_LLAMA_F_CODEC) &&
                            (!known_set || (layout_dtype(known, true) != SPECKV_DTYPE_OPAQUE &&
                                            layout_dtype(known, false) != SPECKV_DTYPE_OPAQUE));
    auto has = [&](const uint8_t *k, bool *yes) {
        speckv_handle h = 0;
        int rc = speckv_lookup(pool, tenant, k, &h);
        if (rc == SPECKV_OK) speckv_free(pool, h);
        *yes = rc == SPECKV_OK;
        return rc == SPECKV_OK || rc == SPECKV_ENOENT ? SPECKV_LLAMA_OK : pool_fail("speckv_lookup", rc);
    };
    std::vector<size_t> missing;
    for (size_t b = 0; b < nb; ++b) {
        const uint8_t *k = &key[b * SPECKV_HASH_BYTES];
        bool yes = false;
        if (int rc = has(k, &yes)) return rc;
        for (char which : {'K', 'V'}) {
            if (!yes || !want_split) break;
            uint8_t pk[SPECKV_HASH_BYTES];
            if (int rc = piece_key(k, which, pk)) return rc;
            if (int rc = has(pk, &yes)) return rc;
        }
        if (yes) st.blocks_present++;
        else missing.push_back(b);
    }
    if (missing.empty()) return SPECKV_LLAMA_OK;

    size_t sz = llama_state_seq_get_size(ctx, seq_id);
    std::vector<uint8_t> s;
    try {
        s.resize(sz);
    } catch (const std::bad_alloc &) {
        return fail(SPECKV_LLAMA_ENOMEM, "no memory for the sequence state");
    }
    if (sz == 0 || llama_state_seq_get_data(ctx, s.data(), sz, seq_id) != sz)
        return fail(SPECKV_LLAMA_EFORMAT, "llama_state_seq_get_data failed");
    Parsed P;
    if (int rc = parse(s.data(), s.size(), seq_id, P)) return rc;
    if (known_set && !(P.layout == known))
        return fail(SPECKV_LLAMA_EFORMAT, "the context's KV layout changed under this handle");
    known = P.layout;
    known_set = true;
    // cell of each position below nb*B
    std::vector<int64_t> cell(nb * B, -1);
    for (uint32_t i = 0; i < P.cell_count; ++i) {
        int32_t p = P.cell_pos[i];
        if ((size_t)p >= cell.size()) continue;
        if (cell[p] != -1) return fail(SPECKV_LLAMA_EFORMAT, "position " + std::to_string(p) + " held twice");
        cell[p] = i;
    }
    for (size_t p = 0; p < cell.size(); ++p)
        if (cell[p] < 0) return fail(SPECKV_LLAMA_EFORMAT, "position " + std::to_string(p) + " missing");

    const Layout &L = P.layout;
    const size_t hdr = sizeof(BlockHeader) + B * 4 + n_layer * sizeof(LayerFmt);
    const size_t payload = L.token_bytes() * B;
    const int32_t k_dtype = layout_dtype(L, true), v_dtype = layout_dtype(L, false);
    const bool split = (flags & SPECKV_LLAMA_F_CODEC) && k_dtype != SPECKV_DTYPE_OPAQUE && v_dtype != SPECKV_DTYPE_OPAQUE;
    size_t k_total = 0;
    for (size_t l = 0; l < n_layer; ++l) k_total += L.k_bytes(l) * B;
    std::vector<uint8_t> blk(hdr + payload);
    for (size_t b : missing) {
        uint8_t *w = blk.data();
        BlockHeader hd{};
        std::memcpy(hd.magic, kBlockMagic, 8);
        hd.version = split ? kBlockVersionSplit : kBlockVersion;
        hd.block_tokens = block_tokens;
        hd.n_layer = n_layer;
        hd.v_trans = L.v_trans;
        hd.payload_bytes = payload;
        hd.block_index = b;
        std::memcpy(hd.key, &key[b * SPECKV_HASH_BYTES], SPECKV_HASH_BYTES);
        std::memcpy(w, &hd, sizeof hd);
        w += sizeof hd;
        std::memcpy(w, tokens + b * B, B * 4);
        w += B * 4;
        std::memcpy(w, L.layers.data(), n_layer * sizeof(LayerFmt));
        w += n_layer * sizeof(LayerFmt);
        for (size_t l = 0; l < n_layer; ++l) {
            const uint64_t kr = L.k_bytes(l);
            for (size_t t = 0; t < B; ++t, w += kr) std::memcpy(w, P.k_data[l] + cell[b * B + t] * kr, kr);
        }
        for (size_t l = 0; l < n_layer; ++l) {
            const LayerFmt &f = L.layers[l];
            if (!L.v_trans) {
                for (size_t t = 0; t < B; ++t, w += f.v_row)
                    std::memcpy(w, P.v_data[l] + cell[b * B + t] * f.v_row, f.v_row);
            } else {
                for (size_t j = 0; j < f.v_embd; ++j)
                    for (size_t t = 0; t < B; ++t, w += f.v_row)
                        std::memcpy(w, P.v_data[l] + (j * P.cell_count + cell[b * B + t]) * f.v_row, f.v_row);
            }
        }
        // Pieces first, the header block last: a reader that finds the header
        // finds its pieces unless they were evicted since.
        bool present = false;
        if (split) {
            uint8_t pk[SPECKV_HASH_BYTES], pv[SPECKV_HASH_BYTES];
            if (int rc = piece_key(hd.key, 'K', pk)) return rc;
            if (int rc = piece_key(hd.key, 'V', pv)) return rc;
            if (int rc = put_block(blk.data() + hdr, k_total, k_dtype, SPECKV_HINT_KEYS, seq_id, b, pk, &present))
                return rc;
            if (int rc = put_block(blk.data() + hdr + k_total, payload - k_total, v_dtype, SPECKV_HINT_VALUES, seq_id,
                                   b, pv, &present))
                return rc;
        }
        if (int rc = put_block(blk.data(), split ? hdr : blk.size(), SPECKV_DTYPE_OPAQUE, 0, seq_id, b, hd.key,
                               &present))
            return rc;
        if (present) {
            st.blocks_present++;
            continue;
        }
        st.blocks_stored++;
        st.bytes_stored += blk.size();
        if (stored) ++*stored;
    }
    return SPECKV_LLAMA_OK;
}

extern "C" {

int speckv_llama_model_id_file(const char *path, uint8_t out[32]) {
    if (!path || !out) return SPECKV_LLAMA_EINVAL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return SPECKV_LLAMA_EINVAL;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || sb.st_size <= 0) {
        close(fd);
        return SPECKV_LLAMA_EINVAL;
    }
    void *m = mmap(nullptr, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return SPECKV_LLAMA_EINVAL;
    static const char tag[] = "speckv-llama model file";
    uint8_t salt[SPECKV_HASH_BYTES];
    int rc = speckv_block_hash(SPECKV_HASH_NATIVE, 0, nullptr, nullptr, 0, tag, sizeof tag, salt);
    if (rc == SPECKV_OK) rc = speckv_block_hash(SPECKV_HASH_NATIVE, 0, salt, nullptr, 0, m, (size_t)sb.st_size, out);
    munmap(m, (size_t)sb.st_size);
    return rc == SPECKV_OK ? SPECKV_LLAMA_OK : SPECKV_LLAMA_EPOOL;
}

int speckv_llama_open(speckv_pool *pool, llama_context *ctx, const speckv_llama_params *params, speckv_llama **out) {
    // Callers built before `flags` existed pass the shorter size.
    if (!pool || !ctx || !params || !out ||
        (params->struct_size != sizeof(speckv_llama_params) &&
         params->struct_size != offsetof(speckv_llama_params, flags)))
        return SPECKV_LLAMA_EINVAL;
    const uint32_t flags = params->struct_size == sizeof(speckv_llama_params) ? params->flags : 0;
    if (flags & ~SPECKV_LLAMA_F_CODEC) return SPECKV_LLAMA_EINVAL;
    try {
        auto *a = new speckv_llama();
        a->pool = pool;
        a->ctx = ctx;
        a->tenant = params->tenant;
        a->flags = flags;
        a->block_tokens = params->block_tokens ? params->block_tokens : 16;
        const llama_model *model = llama_get_model(ctx);
        a->n_layer = (uint32_t)llama_model_n_layer(model);
        if (a->block_tokens > 65536 || a->n_layer == 0) {
            delete a;
            return SPECKV_LLAMA_EINVAL;
        }
        // extra = tag, model id, block size, layers, width, KV description
        static const char tag[16] = "speckv-llama/1";
        uint32_t geo[3] = {a->block_tokens, a->n_layer, (uint32_t)llama_model_n_embd(model)};
        const char *d = params->kv_desc ? params->kv_desc : "";
        a->extra.insert(a->extra.end(), tag, tag + sizeof tag);
        a->extra.insert(a->extra.end(), params->model_id, params->model_id + 32);
        a->extra.insert(a->extra.end(), (const uint8_t *)geo, (const uint8_t *)geo + sizeof geo);
        a->extra.insert(a->extra.end(), d, d + std::strlen(d));
        a->st.struct_size = sizeof(speckv_llama_stats);
        *out = a;
        return SPECKV_LLAMA_OK;
    } catch (...) {
        return SPECKV_LLAMA_ENOMEM;
    }
}

void speckv_llama_close(speckv_llama *a) { delete a; }

int speckv_llama_restore(speckv_llama *a, int32_t seq_id, const int32_t *tokens, size_t n, size_t *restored) {
    if (!a || !restored) return SPECKV_LLAMA_EINVAL;
    try {
        return a->restore(seq_id, tokens, n, restored);
    } catch (const std::bad_alloc &) {
        *restored = 0;
        return a->fail(SPECKV_LLAMA_ENOMEM, "out of memory");
    } catch (...) {
        *restored = 0;
        return a->fail(SPECKV_LLAMA_ECTX, "unexpected exception");
    }
}

int speckv_llama_store(speckv_llama *a, int32_t seq_id, const int32_t *tokens, size_t n, size_t *stored) {
    if (!a) return SPECKV_LLAMA_EINVAL;
    try {
        return a->store(seq_id, tokens, n, stored);
    } catch (const std::bad_alloc &) {
        return a->fail(SPECKV_LLAMA_ENOMEM, "out of memory");
    } catch (...) {
        return a->fail(SPECKV_LLAMA_ECTX, "unexpected exception");
    }
}

int speckv_llama_block_keys(speckv_llama *a, const int32_t *tokens, size_t n, uint8_t *out, size_t cap) {
    if (!a || (n && !tokens) || (cap && !out)) return SPECKV_LLAMA_EINVAL;
    try {
        size_t nb = n / a->block_tokens;
        if (nb > cap) nb = cap;
        std::vector<uint8_t> k;
        if (int rc = a->keys(tokens, nb, k)) return rc;
        if (nb) std::memcpy(out, k.data(), k.size());
        return (int)nb;
    } catch (...) {
        return SPECKV_LLAMA_ENOMEM;
    }
}

int speckv_llama_stats_get(speckv_llama *a, speckv_llama_stats *out) {
    if (!a || !out || out->struct_size != sizeof(speckv_llama_stats)) return SPECKV_LLAMA_EINVAL;
    *out = a->st;
    return SPECKV_LLAMA_OK;
}

const char *speckv_llama_errmsg(const speckv_llama *a) { return a ? a->err.c_str() : "NULL handle"; }

}  // extern "C"
