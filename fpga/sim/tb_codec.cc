// SPDX-License-Identifier: Apache-2.0
// Verilator testbench of the codec RTL (fpga/rtl): every record byte the
// encoder emits and every page byte the decoder emits is compared with the C++
// reference (lib/codec/codec_ref.cc), with random valid/ready stalls on all sides;
// hostile records must be rejected whenever the C++ decoder rejects them.
// Modes: raw, paper, int8, vp8/vp6/vp5 (Rice), vp8s/vp6s/vp5s (split Rice),
// k3p..v5p (packed, §19) from the page generator, every other preset in the
// decoder's records. Runs without stalls measure cycles per page (paper, vp6,
// vp6s, v4p).
//
//   tb_codec [--pages N] [--fuzz N] [--seed S] [--stall PCT] [--perf N] [--corpus DIR]
//            [--perf-modes 1,16,31,36]   mode ids of the throughput runs
//            [--vectors DIR]   the triples of `speckv codec vectors --out DIR` (docs/codec.md §12)
//
// Exit status: 0 all equal, 1 a mismatch, 2 usage.
#include <CLI/CLI.hpp>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <dirent.h>
#include <string>
#include <vector>

#include "Vspeckv_codec_top.h"
#include "verilated.h"

#include "codec/codec.h"
#include "pages.h"
#include "records.h"
#include "ref.h"
#include "vectors.h"

#ifndef SPECKV_DW
#define SPECKV_DW 512
#endif
#ifndef SPECKV_MAX_BYTES
#define SPECKV_MAX_BYTES 4096
#endif

namespace {

using namespace fpga_sim;

constexpr int kBB = SPECKV_DW / 8;
constexpr uint32_t kMaxBytes = SPECKV_MAX_BYTES;

void set_wide(uint32_t *w, const uint8_t *src, size_t n) {
    std::memset(w, 0, kBB);
    for (size_t i = 0; i < n; i++) w[i / 4] |= uint32_t(src[i]) << (8 * (i % 4));
}
void get_wide(const uint32_t *w, uint8_t *dst, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = uint8_t(w[i / 4] >> (8 * (i % 4)));
}

// The modes the encoder RTL implements (others it stores raw, unlike the C++):
// raw, paper, int8, vp8/vp6/vp5 (Rice), vp8s/vp6s/vp5s (split Rice), and the
// packed presets k3p..v5p (speckv_penc).
bool rtl_encodes(int mode) {
    return mode == 0 || mode == 1 || mode == 2 || (mode >= 15 && mode <= 17) || (mode >= 30 && mode <= 38);
}
bool is_split(const std::vector<uint8_t> &r) { return r.size() > 7 && r[3] != 0 && ((r[7] >> 2) & 3) == 3; }

struct EncJob {
    Page page;
    std::vector<uint8_t> expect;  // C++ record
};
struct Stats {
    uint64_t enc_pages = 0, enc_mismatch = 0, enc_raw = 0, enc_bytes_in = 0, enc_bytes_out = 0;
    uint64_t dec_records = 0, dec_ok = 0, dec_mismatch = 0, dec_rejected = 0, dec_unsup = 0, dec_packed = 0;
    uint64_t dec_packed_ok = 0, dec_packed_rejected = 0, dec_packed_unsup = 0, enc_packed = 0;
    uint64_t dec_missed_reject = 0, dec_false_reject = 0, hostile = 0;
    uint64_t enc_split = 0, dec_split = 0, dec_split_ok = 0, dec_split_rejected = 0, dec_split_unsup = 0;
    uint64_t dec_split_run = 0;  // split records decoded equal with a zero run longer than a beat's Unary view (DW bits)
    uint64_t kinds[kKinds] = {};
    uint64_t status_hist[16] = {};
};

class Harness {
public:
    Harness(uint64_t seed, int stall_pct) : rng_(seed ^ 0x5eed), stall_(stall_pct) {
        top_.rst = 1;
        top_.clk = 0;
        for (int i = 0; i < 4; i++) tick();
        top_.rst = 0;
    }
    ~Harness() { top_.final(); }

    std::deque<EncJob> enc_q;
    std::deque<DecJob> dec_q;
    Stats st;
    uint64_t cycles = 0;
    // timestamps for the performance run
    uint64_t enc_first_in = 0, enc_last_out = 0, dec_first_in = 0, dec_last_out = 0;
    // steady state: first and last end of record (encoder) / end of page (decoder), and how many
    uint64_t enc_end_first = 0, enc_ends = 0, dec_end_first = 0, dec_end_last = 0, dec_ends = 0;
    // latency: encoder last page beat in -> first record beat out; decoder first record beat in -> first page beat out
    uint64_t enc_lat_sum = 0, enc_lat_n = 0, enc_lat_min = ~uint64_t(0), enc_lat_max = 0;
    uint64_t dec_lat_sum = 0, dec_lat_n = 0, dec_lat_min = ~uint64_t(0), dec_lat_max = 0;
    int max_report = 8;

    void run() {
        while (!enc_q.empty() || !dec_q.empty() || enc_out_pending_ || dec_pending_) {
            step();
            if (cycles > limit_) {
                std::fprintf(stderr, "FAIL: simulation did not finish (hang?) after %" PRIu64 " cycles\n", cycles);
                st.enc_mismatch++;
                return;
            }
        }
    }
    void set_limit(uint64_t l) { limit_ = l; }

private:
    bool chance() { return stall_ > 0 && int(rng_.below(100)) < stall_; }

    void tick() {
        top_.clk = 0;
        top_.eval();
        top_.clk = 1;
        top_.eval();
        cycles++;
    }

    void step() {
        // ---- drive inputs for this cycle (sampled at the rising edge)
        // encoder source
        bool ein = false;
        if (!enc_q.empty() && !chance()) {
            const Page &p = enc_q.front().page;
            size_t off = size_t(enc_beat_) * kBB;
            size_t nb = std::min<size_t>(kBB, p.bytes.size() - off);
            set_wide(top_.enc_in_data.data(), p.bytes.data() + off, nb);
            top_.enc_in_nbytes = uint8_t(nb);
            top_.enc_in_last = off + nb == p.bytes.size();
            top_.enc_cfg_mode = uint8_t(p.mode);
            top_.enc_cfg_dtype = uint8_t(p.dtype);
            top_.enc_cfg_channels = uint16_t(p.channels > 65535 ? 0 : p.channels);
            ein = true;
        }
        top_.enc_in_valid = ein;
        top_.enc_out_ready = !chance();
        // decoder source
        bool din = false;
        if (!dec_q.empty() && !chance()) {
            const auto &r = dec_q.front().rec;
            size_t off = size_t(dec_beat_) * kBB;
            size_t nb = std::min<size_t>(kBB, r.size() - off);
            set_wide(top_.dec_in_data.data(), r.data() + off, nb);
            top_.dec_in_nbytes = uint8_t(nb);
            top_.dec_in_last = off + nb == r.size();
            din = true;
        }
        top_.dec_in_valid = din;
        top_.dec_out_ready = !chance();
        // a status is taken only once no output beat is left pending (the last
        // one may go in the same cycle): the decoder presents record k+1's
        // beats only after record k's status is taken, so every output beat
        // belongs to the record whose status follows
        top_.dec_st_ready = (!top_.dec_out_valid || top_.dec_out_ready) && !chance();

        top_.clk = 0;
        top_.eval();
        // ---- sample handshakes (values before the edge)
        bool e_in_fire = ein && top_.enc_in_ready;
        bool e_out_fire = top_.enc_out_valid && top_.enc_out_ready;
        bool d_in_fire = din && top_.dec_in_ready;
        bool d_out_fire = top_.dec_out_valid && top_.dec_out_ready;
        bool d_st_fire = top_.dec_st_valid && top_.dec_st_ready;
        uint8_t buf[kBB];
        if (e_out_fire && enc_rec_.empty() && !enc_lastin_.empty()) {
            uint64_t l = cycles + 1 - enc_lastin_.front();
            enc_lastin_.pop_front();
            enc_lat_sum += l, enc_lat_n++, enc_lat_min = std::min(enc_lat_min, l), enc_lat_max = std::max(enc_lat_max, l);
        }
        if (d_out_fire && dec_out_.empty()) {
            uint64_t t = !dec_wait_.empty() ? dec_wait_.front().t_in : !dec_q.empty() ? dec_q.front().t_in : 0;
            if (t) {
                uint64_t l = cycles + 1 - t;
                dec_lat_sum += l, dec_lat_n++, dec_lat_min = std::min(dec_lat_min, l), dec_lat_max = std::max(dec_lat_max, l);
            }
        }
        if (e_out_fire) {
            size_t nb = top_.enc_out_nbytes ? top_.enc_out_nbytes : kBB;
            get_wide(top_.enc_out_data.data(), buf, nb);
            enc_rec_.insert(enc_rec_.end(), buf, buf + nb);
            if (top_.enc_out_last) finish_enc();
        }
        if (d_out_fire) {
            size_t nb = top_.dec_out_nbytes ? top_.dec_out_nbytes : kBB;
            get_wide(top_.dec_out_data.data(), buf, nb);
            dec_out_.insert(dec_out_.end(), buf, buf + nb);
            dec_last_seen_ = top_.dec_out_last;
            dec_last_out = cycles;
            if (top_.dec_out_last) {
                if (!dec_ends++) dec_end_first = cycles;
                dec_end_last = cycles;
            }
        }
        uint8_t st_code = top_.dec_st_code;
        top_.clk = 1;
        top_.eval();
        cycles++;
        // ---- advance the sources
        if (e_in_fire) {
            if (!enc_first_in) enc_first_in = cycles;
            const Page &p = enc_q.front().page;
            enc_beat_++;
            if (size_t(enc_beat_) * kBB >= p.bytes.size()) {
                enc_lastin_.push_back(cycles);
                enc_wait_.push_back(std::move(enc_q.front()));
                enc_q.pop_front();
                enc_beat_ = 0;
                enc_out_pending_ = true;
            }
        }
        if (d_in_fire) {
            if (!dec_first_in) dec_first_in = cycles;
            if (dec_beat_ == 0) dec_q.front().t_in = cycles;
            dec_beat_++;
            if (size_t(dec_beat_) * kBB >= dec_q.front().rec.size()) {
                dec_wait_.push_back(std::move(dec_q.front()));
                dec_q.pop_front();
                dec_beat_ = 0;
                dec_pending_ = true;
            }
        }
        if (d_st_fire) finish_dec(st_code);
    }

    void finish_enc() {
        enc_last_out = cycles;
        if (!enc_ends++) enc_end_first = cycles;
        if (enc_wait_.empty()) {
            std::fprintf(stderr, "FAIL: encoder emitted a record with no page in flight\n");
            st.enc_mismatch++;
            enc_rec_.clear();
            return;
        }
        EncJob j = std::move(enc_wait_.front());
        enc_wait_.pop_front();
        enc_out_pending_ = !enc_wait_.empty() || !enc_q.empty();
        st.enc_pages++;
        st.kinds[j.page.kind]++;
        st.enc_bytes_in += j.page.bytes.size();
        st.enc_bytes_out += enc_rec_.size();
        if (j.expect.size() > 3 && j.expect[3] == 0) st.enc_raw++;
        if (is_split(j.expect)) st.enc_split++;
        if (is_packed(j.expect)) st.enc_packed++;
        if (enc_rec_ != j.expect) {
            st.enc_mismatch++;
            if (max_report-- > 0) {
                size_t i = 0;
                while (i < enc_rec_.size() && i < j.expect.size() && enc_rec_[i] == j.expect[i]) i++;
                std::fprintf(stderr,
                             "MISMATCH enc page %" PRIu64 " kind=%s mode=%d dtype=%d C=%u bytes=%zu: rtl %zu bytes, "
                             "ref %zu bytes, first diff at %zu (rtl %02x ref %02x)\n",
                             st.enc_pages, kind_name(j.page.kind), j.page.mode, j.page.dtype, j.page.channels,
                             j.page.bytes.size(), enc_rec_.size(), j.expect.size(), i,
                             i < enc_rec_.size() ? enc_rec_[i] : 0, i < j.expect.size() ? j.expect[i] : 0);
            }
        }
        enc_rec_.clear();
    }

    void finish_dec(uint8_t code) {
        if (dec_wait_.empty()) {
            std::fprintf(stderr, "FAIL: decoder status with no record in flight\n");
            st.dec_mismatch++;
            return;
        }
        DecJob j = std::move(dec_wait_.front());
        dec_wait_.pop_front();
        dec_pending_ = !dec_wait_.empty();
        st.dec_records++;
        st.status_hist[code & 15]++;
        if (j.hostile) st.hostile++;
        const bool split = is_split(j.rec);
        if (is_packed(j.rec)) {
            st.dec_packed++;
            if (j.ref_rc != SPECKV_OK && code != 0) st.dec_packed_rejected++;
            if (j.ref_rc == SPECKV_OK && code == 0 && dec_out_ == j.expect && dec_last_seen_) st.dec_packed_ok++;
        }
        if (split) {
            st.dec_split++;
            if (j.ref_rc != SPECKV_OK && code != 0) st.dec_split_rejected++;
            if (j.ref_rc == SPECKV_OK && code == 0) {
                st.dec_split_ok++;
                SplitSyms sy;
                if (split_parse(j.rec, &sy) && sy.maxrun >= uint32_t(SPECKV_DW)) st.dec_split_run++;
            }
            if (j.ref_rc == SPECKV_OK && code == 7) st.dec_split_unsup++;
        }
        bool bad = false;
        const char *why = "";
        if (j.ref_rc != SPECKV_OK) {
            if (code == 0) bad = true, why = "C++ rejects, RTL accepts", st.dec_missed_reject++;
            else st.dec_rejected++;
        } else if (code == 7 && rtl_unsupported(j.rec, kMaxBytes)) {
            st.dec_unsup++;
            if (is_packed(j.rec)) st.dec_packed_unsup++;  // valid record with parameters this RTL does not decode
        } else if (code == 7) {
            bad = true, why = "UNSUP on a record this RTL decodes (page scale, b <= 8, split Rice up to MAX_BYTES)",
            st.dec_false_reject++;
        } else if (code != 0) {
            bad = true, why = "C++ accepts, RTL rejects", st.dec_false_reject++;
        } else if (dec_out_ != j.expect || !dec_last_seen_) {
            bad = true, why = "decoded bytes differ";
        } else {
            st.dec_ok++;
        }
        if (bad) {
            st.dec_mismatch++;
            if (max_report-- > 0) {
                size_t i = 0;
                while (i < dec_out_.size() && i < j.expect.size() && dec_out_[i] == j.expect[i]) i++;
                std::fprintf(stderr,
                             "MISMATCH dec record %" PRIu64 " (%s, %zu bytes, mode %d): %s; rtl status %u, ref rc %d, "
                             "rtl %zu bytes, ref %zu, first diff at %zu\n",
                             st.dec_records, j.hostile ? "hostile" : "valid", j.rec.size(),
                             j.rec.size() > 3 ? j.rec[3] : -1, why, code, j.ref_rc, dec_out_.size(),
                             j.expect.size(), i);
            }
        }
        dec_out_.clear();
        dec_last_seen_ = false;
    }

    Vspeckv_codec_top top_;
    Gen rng_;
    int stall_;
    uint64_t limit_ = ~uint64_t(0);
    int enc_beat_ = 0, dec_beat_ = 0;
    bool enc_out_pending_ = false, dec_pending_ = false;
    bool dec_last_seen_ = false;
    std::deque<EncJob> enc_wait_;
    std::deque<uint64_t> enc_lastin_;
    std::deque<DecJob> dec_wait_;
    std::vector<uint8_t> enc_rec_, dec_out_;
};

}  // namespace

int main(int argc, char **argv) {
    Verilated::commandArgs(argc, argv);
    uint64_t pages = 2000, fuzz = 500, seed = 1, perf = 500;
    int stall = 30;
    std::string corpus, vecdir;
    std::vector<int> perf_modes = {1, 16, 31, 36};
    CLI::App app{"Verilator testbench of the codec RTL against the C++ reference", "tb_codec"};
    app.allow_extras();  // +verilator+... arguments are Verilator's (taken above)
    app.add_option("--pages", pages, "random pages through encoder and decoder");
    app.add_option("--fuzz", fuzz, "hostile records through the decoder");
    app.add_option("--seed", seed, "generator seed");
    app.add_option("--stall", stall, "percent of cycles with back-pressure")->check(CLI::Range(0, 100));
    app.add_option("--perf", perf, "pages of the throughput run");
    app.add_option("--perf-modes", perf_modes, "mode ids of the throughput runs (comma-separated)")
        ->delimiter(',')
        ->check(CLI::Range(0, speckv::codec::kModeCount - 1));
    app.add_option("--corpus", corpus, "also decode every file of this fuzz corpus directory");
    app.add_option("--vectors", vecdir, "`speckv codec vectors --out DIR` triples to check");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        return app.exit(e) ? 2 : 0;
    }
    for (const std::string &a : app.remaining())
        if (a.rfind("+verilator", 0) != 0) {
            std::fprintf(stderr, "tb_codec: unknown argument '%s'\n%s", a.c_str(), app.help().c_str());
            return 2;
        }

    Gen g(seed);
    int fail = 0;
    // ---------------------------------------------------------------- `speckv codec vectors` triples
    if (!vecdir.empty()) {
        std::vector<CliVector> vs;
        if (!read_cli_vectors(vecdir, &vs)) return 2;
        Harness h(seed, stall);
        uint64_t enc_n = 0, file_vs_ref = 0;
        for (auto &c : vs) {
            if (rtl_encodes(c.mode_asked) && c.in.size() <= kMaxBytes) {
                EncJob j;
                j.page.mode = c.mode_asked;
                j.page.dtype = c.dtype;
                j.page.channels = c.channels;
                j.page.kind = 0;
                j.page.bytes = c.in;
                j.expect = c.rec;
                if (ref_encode(j.page) != c.rec) file_vs_ref++;  // the file must be what the reference makes
                h.enc_q.push_back(std::move(j));
                enc_n++;
            }
            DecJob d;
            d.rec = c.rec;
            d.ref_rc = SPECKV_OK;
            d.expect = c.out;
            d.hostile = false;
            h.dec_q.push_back(std::move(d));
        }
        h.set_limit(200000 + vs.size() * 4000);
        h.run();
        const Stats &s = h.st;
        std::printf("codec vectors %s: %zu triples; encoder: %" PRIu64 " pages (raw/paper/int8/vp8/vp6/vp5/vp8s/vp6s/vp5s/k3p..v5p asked) "
                    "compared with .rec (%" PRIu64 " split Rice), %" PRIu64
                    " mismatches; decoder: %" PRIu64 " .rec decoded equal to .out (%" PRIu64 " split Rice), %" PRIu64
                    " UNSUP (other parameters), %" PRIu64 " mismatches; %" PRIu64 " .rec files differ from the linked reference\n",
                    vecdir.c_str(), vs.size(), s.enc_pages, s.enc_split, s.enc_mismatch, s.dec_ok, s.dec_split_ok, s.dec_unsup,
                    s.dec_mismatch, file_vs_ref);
        if (s.enc_mismatch || s.dec_mismatch || s.enc_pages != enc_n || file_vs_ref) fail = 1;
    }
    // ---------------------------------------------------------------- checked run with stalls
    if (pages || fuzz || !corpus.empty()) {
        Harness h(seed, stall);
        // hostile and other-mode records for the decoder, interleaved with the pages' records
        std::vector<std::vector<uint8_t>> extra = read_corpus(corpus);
        size_t corpus_n = extra.size();
        for (uint64_t k = 0; k < fuzz; k++) {
            Page p = g.page(kMaxBytes);
            // other presets too: valid records the RTL reports UNSUP (or decodes, for C = 1 columnar)
            // (the §19 packed presets included: speckv_pdec decodes them)
            if (g.below(3) == 0 && p.dtype != SPECKV_DTYPE_OPAQUE)
                p.mode = 3 + int(g.below(uint32_t(speckv::codec::kModeCount - 3)));
            auto rec = ref_encode(p);
            extra.push_back(g.below(10) == 0 ? random_record(g) : g.below(8) == 0 ? rec : mutate(g, rec));
        }
        size_t stride = extra.empty() ? 0 : std::max<size_t>(1, size_t(pages) / extra.size());
        size_t xi = 0;
        for (uint64_t k = 0; k < pages; k++) {
            EncJob j;
            j.page = g.page(kMaxBytes);
            j.expect = ref_encode(j.page);
            h.dec_q.push_back(ref_decode(j.expect, false));
            h.enc_q.push_back(std::move(j));
            if (stride && k % stride == 0 && xi < extra.size()) {
                if (!extra[xi].empty()) h.dec_q.push_back(ref_decode(extra[xi], true));
                xi++;
            }
        }
        for (; xi < extra.size(); xi++)
            if (!extra[xi].empty()) h.dec_q.push_back(ref_decode(extra[xi], true));
        h.set_limit(200000 + (pages + fuzz) * 4000);
        h.run();
        const Stats &s = h.st;
        std::printf("checked run (seed %" PRIu64 ", %d%% stalls on every valid/ready): %" PRIu64 " cycles\n", seed, stall,
                    h.cycles);
        std::printf("  encoder: %" PRIu64 " pages compared byte for byte, %" PRIu64 " mismatches; %" PRIu64
                    " stored raw (bypass), %" PRIu64 " split-Rice records, %" PRIu64 " packed records; ratio %.3f\n",
                    s.enc_pages, s.enc_mismatch, s.enc_raw, s.enc_split, s.enc_packed,
                    s.enc_bytes_out ? double(s.enc_bytes_in) / double(s.enc_bytes_out) : 0.0);
        std::printf("  page kinds:");
        for (int k = 0; k < kKinds; k++) std::printf(" %s=%" PRIu64, kind_name(k), s.kinds[k]);
        std::printf("\n");
        std::printf("  decoder: %" PRIu64 " records (%" PRIu64 " hostile, %zu from the corpus): %" PRIu64
                    " decoded equal, %" PRIu64 " rejected as the C++ does, %" PRIu64 " valid but UNSUP (%" PRIu64
                    " of them packed), %" PRIu64 " mismatches (%" PRIu64 " missed rejects, %" PRIu64
                    " false rejects)\n",
                    s.dec_records, s.hostile, corpus_n, s.dec_ok, s.dec_rejected, s.dec_unsup, s.dec_packed_unsup, s.dec_mismatch,
                    s.dec_missed_reject, s.dec_false_reject);
        std::printf("  packed records to the decoder: %" PRIu64 " (%" PRIu64 " decoded equal, %" PRIu64
                    " rejected as the C++ does)\n",
                    s.dec_packed, s.dec_packed_ok, s.dec_packed_rejected);
        std::printf("  split-Rice records to the decoder: %" PRIu64 " (%" PRIu64 " decoded equal, %" PRIu64
                    " of them with a zero run of >= %d bits in Unary; %" PRIu64 " rejected as the C++ does, %" PRIu64
                    " valid but UNSUP)\n",
                    s.dec_split, s.dec_split_ok, s.dec_split_run, SPECKV_DW, s.dec_split_rejected, s.dec_split_unsup);
        std::printf("  decoder status histogram:");
        for (int c = 0; c < 8; c++) std::printf(" %d:%" PRIu64, c, s.status_hist[c]);
        std::printf("\n");
        if (s.enc_mismatch || s.dec_mismatch || s.enc_pages != pages) fail = 1;
    }
    // ---------------------------------------------------------------- throughput runs, no stalls
    // paper (bytes + RLE), vp6 (Rice, the adaptive policy's V preset), vp6s (split Rice), v4p (packed)
    for (int pm : perf_modes) {
        if (!perf) break;
        Harness h(seed + 1, 0);
        uint64_t bytes = 0, rec_bytes = 0, raw_recs = 0;
        Gen gp(seed + 7);
        for (uint64_t k = 0; k < perf; k++) {
            EncJob j;
            j.page = gp.page(kMaxBytes, 1);  // KV-like 4 KiB FP16 pages
            while (j.page.bytes.size() != kMaxBytes || j.page.dtype != SPECKV_DTYPE_FP16) j.page = gp.page(kMaxBytes, 1);
            j.page.mode = pm;
            j.page.channels = 64;
            j.expect = ref_encode(j.page);
            bytes += j.page.bytes.size();
            rec_bytes += j.expect.size();
            raw_recs += j.expect[3] == 0;
            h.dec_q.push_back(ref_decode(j.expect, false));
            h.enc_q.push_back(std::move(j));
        }
        h.run();
        const Stats &s = h.st;
        double ecyc = double(h.enc_last_out - h.enc_first_in + 1) / double(perf);
        double dcyc = double(h.dec_last_out - h.dec_first_in + 1) / double(perf);
        std::printf("throughput run (no stalls, %" PRIu64 " KV-like FP16 %u-byte pages, %s mode, ratio %.3f, %" PRIu64
                    " stored raw):\n",
                    perf, kMaxBytes, speckv::codec::mode_name(speckv::codec::Mode(pm)), double(bytes) / double(rec_bytes),
                    raw_recs);
        // steady state: between the first and the last page's end, so the pipeline fill does not count
        double esty = h.enc_ends > 1 ? double(h.enc_last_out - h.enc_end_first) / double(h.enc_ends - 1) : ecyc;
        double dsty = h.dec_ends > 1 ? double(h.dec_end_last - h.dec_end_first) / double(h.dec_ends - 1) : dcyc;
        std::printf("  encoder: %.1f cycles/page, %.2f input bytes/cycle, %.2f GB/s at 800 MHz; steady state %.2f cycles/page, "
                    "%.2f bytes/cycle, %.2f GB/s\n",
                    ecyc, kMaxBytes / ecyc, kMaxBytes / ecyc * 0.8, esty, kMaxBytes / esty, kMaxBytes / esty * 0.8);
        std::printf("  decoder: %.1f cycles/page, %.2f output bytes/cycle, %.2f GB/s at 800 MHz; steady state %.2f cycles/page, "
                    "%.2f bytes/cycle, %.2f GB/s\n",
                    dcyc, kMaxBytes / dcyc, kMaxBytes / dcyc * 0.8, dsty, kMaxBytes / dsty, kMaxBytes / dsty * 0.8);
        std::printf("  latency: encoder last page beat in -> first record beat out %.1f cycles (min %" PRIu64 ", max %" PRIu64
                    "); decoder first record beat in -> first page beat out %.1f cycles (min %" PRIu64 ", max %" PRIu64 ")\n",
                    h.enc_lat_n ? double(h.enc_lat_sum) / double(h.enc_lat_n) : 0.0, h.enc_lat_min, h.enc_lat_max,
                    h.dec_lat_n ? double(h.dec_lat_sum) / double(h.dec_lat_n) : 0.0, h.dec_lat_min, h.dec_lat_max);
        if (s.enc_mismatch || s.dec_mismatch || s.enc_pages != perf) fail = 1;
    }
    std::printf("%s\n", fail ? "FPGA-RTL FAIL" : "FPGA-RTL PASS");
    return fail;
}
