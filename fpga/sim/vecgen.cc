// SPDX-License-Identifier: Apache-2.0
// Writes the hex vectors of the iverilog testbench (fpga/sim/tb_codec.v):
// one page of every generator kind (the spec's edge cases, random mode; every
// third one in a packed preset, k3p..v5p in turn), the
// same kinds again in the Rice modes (vp8, vp6, vp5 in turn), again in the
// split-Rice modes (vp8s, vp6s, vp5s), then random pages, then hostile
// records; expectations come from the C++ reference.
//   fpga_vecgen DIR [--pages N] [--fuzz N] [--seed S] [--bytes PAGE_BYTES] [--beat BYTES]
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "records.h"
#include "ref.h"
#include "vectors.h"

int main(int argc, char **argv) {
    using namespace fpga_sim;
    std::string dir;
    uint64_t pages = 16, fuzz = 16, seed = 1;
    uint32_t page_bytes = 4096, beat = 64;
    CLI::App app{"hex vectors of the iverilog testbench (fpga/sim/tb_codec.v)", "fpga_vecgen"};
    app.add_option("DIR", dir, "output directory")->required();
    app.add_option("--pages", pages, "pages: every generator kind, then random");
    app.add_option("--fuzz", fuzz, "hostile records");
    app.add_option("--seed", seed, "generator seed");
    app.add_option("--bytes", page_bytes, "bytes per page");
    app.add_option("--beat", beat, "bytes per bus beat");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        return app.exit(e) ? 2 : 0;
    }
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    Gen g(seed);
    std::vector<EncVec> ev;
    std::vector<DecVec> dv;
    for (uint64_t k = 0; k < pages; k++) {
        Page p = g.page(page_bytes, k < uint64_t(3 * kKinds) ? int(k % kKinds) : -1);
        if (k < uint64_t(kKinds) && k % 3 == 0 && p.dtype != SPECKV_DTYPE_OPAQUE)
            p.mode = 33 + int(k / 3) % 6;  // first pass: every third kind in a packed preset (§19)
        if (k >= uint64_t(kKinds) && k < uint64_t(3 * kKinds)) {
            static const int rice[2][3] = {{15, 16, 17}, {30, 31, 32}};
            const int s = k >= uint64_t(2 * kKinds);  // third pass: split Rice
            while (p.dtype == SPECKV_DTYPE_OPAQUE) p = g.page(page_bytes, int(k % kKinds));
            p.mode = p.kind == kKinds - 1 ? rice[s][0] : rice[s][k % 3];  // burst: vp8 / vp8s, the longest escapes
        }
        auto rec = ref_encode(p);
        DecJob j = ref_decode(rec, false);
        dv.push_back({j.rec, j.ref_rc, j.expect});
        // every fifth split-Rice page also as a record with an escape after a zero run longer than
        // the decoder's Unary view (its run-shortening path; valid: the C++ decoder accepts it)
        SplitSyms sy;
        if (k >= uint64_t(2 * kKinds) && k < uint64_t(3 * kKinds) && k % 5 == 0 && split_parse(rec, &sy)) {
            std::vector<uint8_t> force(sy.z.size(), 0);
            std::vector<uint32_t> extra(sy.z.size(), 0);
            size_t i = g.below(uint32_t(sy.z.size()));
            force[i] = 1;
            extra[i] = 600 + g.below(600);
            auto r2 = rec;
            split_replace(r2, split_write(sy, force, extra));
            DecJob j2 = ref_decode(r2, true);
            dv.push_back({j2.rec, j2.ref_rc, j2.expect});
        }
        ev.push_back({std::move(p), std::move(rec)});
    }
    for (uint64_t k = 0; k < fuzz; k++) {
        auto m = mutate(g, ref_encode(g.page(page_bytes)));
        if (m.empty()) continue;
        DecJob j = ref_decode(m, true);
        dv.push_back({j.rec, j.ref_rc, j.expect});
    }
    if (!write_vectors(dir, beat, ev, dv)) return 2;
    std::printf("vectors: %zu pages, %zu records written to %s\n", ev.size(), dv.size(), dir.c_str());
    return 0;
}
