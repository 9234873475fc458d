// SPDX-License-Identifier: Apache-2.0
// Hex vector files for the iverilog testbench (fpga/sim/tb_codec.v): one line
// per DW-bit beat, read with $readmemh. Written by `tb_codec --vectors DIR`.
//   enc_in.hex   {channels:16, dtype:8, mode:8, last:8, nbytes:8, data:DW}
//   enc_exp.hex  {last:8, nbytes:8, data:DW}   expected record beats
//   dec_in.hex   {last:8, nbytes:8, data:DW}   records for the decoder
//   dec_exp.hex  {last:8, nbytes:8, data:DW}   expected page beats (accepted records)
//   dec_st.hex   {beats:24, reject:8}          per record: expected beats, 1 = must be rejected
//   counts.hex   enc_in, enc_exp, dec_in, dec_exp beats, pages, records (32 bits each)
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "pages.h"

namespace fpga_sim {

struct EncVec {
    Page page;
    std::vector<uint8_t> rec;
};
struct DecVec {
    std::vector<uint8_t> rec;
    int ref_rc;
    std::vector<uint8_t> expect;
};

inline void hex_beat(FILE *f, const uint8_t *p, size_t n, size_t bb) {
    for (size_t i = bb; i-- > 0;) std::fprintf(f, "%02x", i < n ? p[i] : 0);
}

// Splits `b` into beats of `bb` bytes; writes {prefix, last, nbytes, data} lines.
inline size_t write_beats(FILE *f, const std::vector<uint8_t> &b, size_t bb, const char *prefix) {
    size_t k = 0;
    for (size_t off = 0; off < b.size(); off += bb, k++) {
        size_t n = std::min(bb, b.size() - off);
        std::fprintf(f, "%s%02x%02x", prefix, off + n == b.size() ? 1 : 0, unsigned(n));
        hex_beat(f, b.data() + off, n, bb);
        std::fputc('\n', f);
    }
    return k;
}

// True if the record is valid but uses parameters the decoder RTL reports UNSUP for
// (channel/token scales, b > 8, columnar order with C > 1; split Rice whose
// page is larger than the RTL's MAX_BYTES: it is decoded from a record buffer).
// A record of the fixed-width packed entropy (flags bits 2-4 = 4, docs/codec.md
// §19): decoded by speckv_pdec, which buffers the record (UNSUP above MAX_BYTES).
inline bool is_packed(const std::vector<uint8_t> &r) { return r.size() >= 24 && ((r[7] >> 2) & 7) == 4; }

inline bool rtl_unsupported(const std::vector<uint8_t> &r, size_t max_bytes = 4096) {
    if (r.size() < 24 || r[3] == 0) return false;
    if (is_packed(r)) {
        const uint64_t n = r[8] | (r[9] << 8) | (r[10] << 16) | (uint64_t(r[11]) << 24);
        return n * (r[4] == 3 ? 4 : 2) > max_bytes;
    }
    unsigned order = r[7] & 3, c = r[12] | (r[13] << 8);
    const bool split = ((r[7] >> 2) & 3) == 3;
    const uint64_t n = r[8] | (r[9] << 8) | (r[10] << 16) | (uint64_t(r[11]) << 24);
    const uint64_t esize = r[4] == 3 ? 4 : r[4] == 0 ? 1 : 2;
    return r[6] != 0 || r[5] > 8 || (order == 2 && c != 1) || (split && n * esize > max_bytes);
}

inline bool write_vectors(const std::string &dir, size_t bb, const std::vector<EncVec> &ev,
                          const std::vector<DecVec> &dv) {
    auto open = [&](const char *name) {
        FILE *f = std::fopen((dir + "/" + name).c_str(), "w");
        if (!f) std::fprintf(stderr, "cannot write %s/%s\n", dir.c_str(), name);
        return f;
    };
    FILE *fi = open("enc_in.hex"), *fe = open("enc_exp.hex"), *di = open("dec_in.hex"), *de = open("dec_exp.hex"),
         *ds = open("dec_st.hex"), *fc = open("counts.hex");
    if (!fi || !fe || !di || !de || !ds || !fc) return false;
    size_t n_ei = 0, n_ee = 0, n_di = 0, n_de = 0, n_rec = 0;
    for (const auto &e : ev) {
        char pre[16];
        std::snprintf(pre, sizeof pre, "%04x%02x%02x", e.page.channels > 65535 ? 0 : e.page.channels, e.page.dtype,
                      e.page.mode);
        n_ei += write_beats(fi, e.page.bytes, bb, pre);
        n_ee += write_beats(fe, e.rec, bb, "");
    }
    for (const auto &d : dv) {
        if (d.ref_rc == 0 && rtl_unsupported(d.rec)) continue;
        n_di += write_beats(di, d.rec, bb, "");
        size_t k = d.ref_rc == 0 ? write_beats(de, d.expect, bb, "") : 0;
        n_de += k;
        std::fprintf(ds, "%06zx%02x\n", k, d.ref_rc == 0 ? 0 : 1);
        n_rec++;
    }
    std::fprintf(fc, "%08zx\n%08zx\n%08zx\n%08zx\n%08zx\n%08zx\n", n_ei, n_ee, n_di, n_de, ev.size(), n_rec);
    for (FILE *f : {fi, fe, di, de, ds, fc}) std::fclose(f);
    return true;
}

}  // namespace fpga_sim
