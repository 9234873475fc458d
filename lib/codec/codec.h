// SPDX-License-Identifier: Apache-2.0
// The KV codec: a page of FP16/BF16/FP32 values <-> a self-describing record.
// The byte format is docs/codec.md (the contract with the RTL); this header is
// the internal API the pool calls. Thread-safety: every function is reentrant
// (scratch memory is thread-local); any thread may call any function at once.
#pragma once
#include <cstddef>
#include <cstdint>

namespace speckv::codec {

// Preset ids (docs/codec.md §9). The value is the record's "mode id" byte.
enum class Mode : uint8_t {
    raw = 0,
    paper = 1,
    int8 = 2,
    k8 = 3,
    v8 = 4,
    k6 = 5,
    v6 = 6,
    k5 = 7,
    v5 = 8,
    p8r = 9,
    k4 = 10,
    v4 = 11,
    k9 = 12,   // §13: b 9..12
    k10 = 13,
    k12 = 14,
    vp8 = 15,  // §16: page scale, no delta, Rice
    vp6 = 16,
    vp5 = 17,
    k8s = 18,  // §18: split Rice, the Rice preset of the same name without `s`
    v8s = 19,
    k6s = 20,
    v6s = 21,
    k5s = 22,
    v5s = 23,
    p8rs = 24,
    k4s = 25,
    v4s = 26,
    k9s = 27,
    k10s = 28,
    k12s = 29,
    vp8s = 30,
    vp6s = 31,
    vp5s = 32,
    k3p = 33,  // §19: fixed-width packed, asymmetric (scale + zero point, FP16)
    v3p = 34,
    k4p = 35,
    v4p = 36,
    k5p = 37,
    v5p = 38,
};
constexpr int kModeCount = 39;

enum Group : uint8_t { kGroupPage = 0, kGroupChannel = 1, kGroupToken = 2 };
enum Order : uint8_t { kOrderNone = 0, kOrderLinear = 1, kOrderColumnar = 2 };
// kEntropyPacked (§19): flags bits 2-4 = 4. Not an entropy coder: the
// asymmetric quantiser of §19 with values bit-packed at fixed width b.
enum Entropy : uint8_t {
    kEntropyBytes = 0,
    kEntropyRle = 1,
    kEntropyRice = 2,
    kEntropySplitRice = 3,
    kEntropyPacked = 4
};

// The parameters a mode id stands for (bits == 0 for raw).
struct Params {
    uint8_t bits;
    uint8_t group;
    uint8_t order;
    uint8_t entropy;
};
Params mode_params(Mode m);
const char *mode_name(Mode m);
// Parses a preset name ("paper", "k6", ...). Returns false if unknown.
bool mode_from_name(const char *name, Mode *out);

// How a page is shaped: `channels` values per token (kv_dim or head_dim).
// Must divide the element count, otherwise the encoder uses one row.
struct Layout {
    uint32_t channels = 1;
};

constexpr size_t kHeaderSize = 24;
constexpr uint32_t kMaxElements = 1u << 24;
constexpr uint16_t kMagic = 0x4B53;  // "SK"
constexpr uint8_t kFormatVersion = 1;

// Bytes per element of a SPECKV_DTYPE_* (0 for an unknown dtype).
size_t dtype_size(int dtype);

// The largest record encode() can produce for `src_bytes` of input
// (a raw record: header + input).
constexpr size_t max_record_size(size_t src_bytes) { return kHeaderSize + src_bytes; }

// The decoded header of a record.
struct Header {
    Mode mode;
    uint8_t dtype;
    Params params;
    uint32_t count;       // elements
    uint16_t channels;
    uint32_t payload_len;
    uint32_t crc;
    size_t record_len() const { return kHeaderSize + payload_len; }
    size_t decoded_bytes() const;
};

// Which implementation runs the kernels. `best` = the fastest this CPU has.
enum class Impl : uint8_t { scalar = 0, avx2 = 1, avx512 = 2, best = 255 };
bool impl_available(Impl impl);
const char *impl_name(Impl impl);

// Encodes `src_bytes` of `dtype` values as one record in `dst`.
// `cap` must be >= max_record_size(src_bytes). Falls back to raw per the
// bypass rule (non-finite values, range, or no gain), so the mode in the
// record may be raw whatever `mode` asked. *out_len = record length.
// Returns SPECKV_OK or SPECKV_EINVAL (NULL, bad dtype/mode, src_bytes not a
// multiple of the element size, 0 or > 2^24 elements, cap too small).
int encode(Mode mode, int dtype, const void *src, size_t src_bytes, Layout layout, uint8_t *dst,
           size_t cap, size_t *out_len, Impl impl = Impl::best);

// Like encode() but with explicit parameters (any point of the format's
// parameter space, docs §4-§6, §13), recorded under mode id `mode`, which
// must not be raw. For experiments and RTL vectors; the pool uses encode().
int encode_params(Mode mode, Params params, int dtype, const void *src, size_t src_bytes, Layout layout,
                  uint8_t *dst, size_t cap, size_t *out_len, Impl impl = Impl::best);

// Decodes a record (untrusted bytes) into dst (cap bytes). *out_bytes =
// decoded bytes (count * dtype size). Never reads rec[len..] or writes
// dst[cap..]. Returns SPECKV_OK, SPECKV_EINVAL (NULL args), SPECKV_ERANGE
// (cap too small for the decoded page), SPECKV_ECORRUPT (any bad record; the
// detail message says what). On any error dst[0, cap) is unspecified: a fast
// path may write values while it still checks the CRC and the range (docs
// §15), so decode into scratch and use dst only when this returns SPECKV_OK.
// rec and dst must not overlap.
int decode(const uint8_t *rec, size_t len, void *dst, size_t cap, size_t *out_bytes,
           Impl impl = Impl::best);

// Parses and validates the header of a record (not the CRC or payload).
// `len` is the bytes available; a record longer than len is SPECKV_ECORRUPT.
int peek_header(const uint8_t *rec, size_t len, Header *out);

// ---- per-layer adaptive selection (docs/codec.md §10)

// Measured cost of one mode on sample pages: bytes, reconstruction error and
// encode time. Used to pick a mode per layer and per K/V.
struct ModeScore {
    Mode mode;
    double ratio;        // input bytes as FP16 / record bytes
    double rel_rmse;     // ||x - x'|| / ||x|| over the samples
    double encode_ns_per_value;
};

// Which presets the adaptive policy chooses among (docs/codec.md §10):
//   fast:  no variable-length stage, so decode speed is that of the preset
//          chosen, whatever it is: int8 and the packed presets of §19
//          (K: int8 k5p k4p k3p; V: int8 v5p v4p v3p).
//   dense: the split Rice presets of §18 and paper (more ratio at the same
//          error, decoded at <= 0.1x memcpy).
enum class AdaptiveSet : uint8_t { fast = 0, dense = 1 };
const char *adaptive_set_name(AdaptiveSet s);
// Parses "fast" or "dense". Returns false if unknown.
bool adaptive_set_from_name(const char *name, AdaptiveSet *out);
// The default relative RMS error budget of K pages with `set` (V: 0.05 with
// either). The lowest-error fast key presets, int8 and k5p, are at 1-2 % on
// real keys, so 0.005 (dense: k8s…k12s fit it) would keep every key in clear.
inline double adaptive_max_err_k(AdaptiveSet set) { return set == AdaptiveSet::fast ? 0.02 : 0.005; }

// The candidates of the adaptive policy (docs/codec.md §10) in `set`, for K
// pages (keys) or V pages: what choose_mode tries, offline and in the pool.
const Mode *adaptive_candidates(bool keys, AdaptiveSet set, size_t *n);

// Objective: the mode with the highest ratio whose rel_rmse <= max_rel_err;
// among equal ratios (within 0.5%), the lower encode cost. `candidates` may be
// NULL for all lossy presets. Returns the chosen mode (raw if none qualifies).
// `pages` points to `npages` pages of `page_elems` FP16/BF16/FP32 values each.
Mode choose_mode(int dtype, const void *pages, size_t npages, size_t page_elems, Layout layout,
                 double max_rel_err, const Mode *candidates, size_t ncandidates,
                 ModeScore *scores_out = nullptr, size_t *nscores = nullptr);

// ---- helpers shared with tests, tools and the CLI

uint16_t fp32_to_fp16_rne(float f);  // IEEE RNE, saturating NOT applied
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16_rne(float f);
float bf16_to_fp32(uint16_t h);

}  // namespace speckv::codec
