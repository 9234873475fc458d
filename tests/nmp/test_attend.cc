// SPDX-License-Identifier: Apache-2.0
// Partial attention and the merge: near-memory partial + "GPU" partial ==
// full attention (float tolerance), for FP32 and FP16 pages, MHA and GQA.
#include <doctest/doctest.h>

#include "nmp_test_util.h"
#include "util/status.h"

using namespace nmp_test;

namespace {

// Full attention in double, the reference.
std::vector<double> reference(const nmp::Geometry &g, const std::vector<float> &q, const std::vector<float> &K,
                              const std::vector<float> &V, uint32_t T) {
    const uint32_t D = g.head_dim, C = g.channels();
    std::vector<double> out(g.q_len());
    const double sc = 1.0 / std::sqrt(double(D));
    for (uint32_t h = 0; h < g.q_heads(); h++) {
        const uint32_t k = h / g.q_per_kv;
        std::vector<double> lg(T);
        double mx = -INFINITY;
        for (uint32_t t = 0; t < T; t++) {
            double d = 0;
            for (uint32_t c = 0; c < D; c++) d += double(q[h * D + c]) * K[size_t(t) * C + k * D + c];
            lg[t] = d * sc;
            mx = std::max(mx, lg[t]);
        }
        double l = 0;
        for (uint32_t t = 0; t < T; t++) l += std::exp(lg[t] - mx);
        for (uint32_t t = 0; t < T; t++)
            for (uint32_t c = 0; c < D; c++)
                out[h * D + c] += std::exp(lg[t] - mx) / l * V[size_t(t) * C + k * D + c];
    }
    return out;
}

void run_merge(const nmp::Geometry &g, int dtype, uint32_t seed) {
    std::mt19937 rng(seed);
    const uint32_t P = 16, npages = 13, last = 5, C = g.channels();
    const uint32_t T = (npages - 1) * P + last;
    std::normal_distribution<float> nd(0, 1);
    std::vector<float> K(size_t(T) * C), V(K.size());
    for (auto &x : K) x = nd(rng) * 2;
    for (auto &x : V) x = nd(rng);
    std::vector<uint16_t> K16(K.size()), V16(V.size());
    if (dtype == SPECKV_DTYPE_FP16) {
        for (size_t i = 0; i < K.size(); i++) {
            K16[i] = speckv::codec::fp32_to_fp16_rne(K[i]);
            K[i] = speckv::codec::fp16_to_fp32(K16[i]);
            V16[i] = speckv::codec::fp32_to_fp16_rne(V[i]);
            V[i] = speckv::codec::fp16_to_fp32(V16[i]);
        }
    }
    std::vector<nmp::PageKV> pages(npages);
    for (uint32_t p = 0; p < npages; p++) {
        const size_t off = size_t(p) * P * C;
        pages[p].k = dtype == SPECKV_DTYPE_FP16 ? static_cast<const void *>(K16.data() + off) : K.data() + off;
        pages[p].v = dtype == SPECKV_DTYPE_FP16 ? static_cast<const void *>(V16.data() + off) : V.data() + off;
        pages[p].tokens = p + 1 < npages ? P : last;
    }
    auto q = random_q(rng, g.q_len());
    const auto ref = reference(g, q, K, V, T);
    // Each group its own "GPU" set (a different split per group), the rest near memory.
    std::vector<uint32_t> gpu, gpu_off{0}, nm, nm_off{0};
    for (uint32_t k = 0; k < g.kv_heads; k++) {
        std::vector<uint32_t> sel;
        for (uint32_t p = 0; p < npages; p++)
            if ((p + k) % 3 == 0 || p == npages - 1) sel.push_back(p);
        std::vector<uint32_t> rest(npages);
        rest.resize(nmp::complement(sel.data(), sel.size(), npages, rest.data()));
        gpu.insert(gpu.end(), sel.begin(), sel.end());
        gpu_off.push_back(uint32_t(gpu.size()));
        nm.insert(nm.end(), rest.begin(), rest.end());
        nm_off.push_back(uint32_t(nm.size()));
    }
    const size_t H = g.q_heads();
    std::vector<float> ao(g.q_len()), am(H), al(H), bo(g.q_len()), bm(H), bl(H), mo(g.q_len()), mm(H), ml(H);
    nmp::Partial a{ao.data(), am.data(), al.data()}, b{bo.data(), bm.data(), bl.data()}, m{mo.data(), mm.data(), ml.data()};
    REQUIRE(nmp::attend_pages(g, dtype, q.data(), q.size(), pages.data(), npages, gpu.data(), gpu.size(),
                              gpu_off.data(), 0, a) == SPECKV_OK);
    REQUIRE(nmp::attend_pages(g, dtype, q.data(), q.size(), pages.data(), npages, nm.data(), nm.size(), nm_off.data(),
                              0, b) == SPECKV_OK);
    nmp::merge_partials(uint32_t(H), g.head_dim, a, b, m);
    double err = 0, nrm = 0;
    for (size_t i = 0; i < ref.size(); i++) {
        err = std::max(err, std::fabs(mo[i] - ref[i]));
        nrm = std::max(nrm, std::fabs(ref[i]));
    }
    CHECK(err <= 1e-5 * std::max(1.0, nrm));
    // The whole set in one call gives the same, and the merge is symmetric.
    std::vector<uint32_t> all(npages);
    for (uint32_t p = 0; p < npages; p++) all[p] = p;
    std::vector<float> fo(g.q_len()), fm(H), fl(H);
    nmp::Partial f{fo.data(), fm.data(), fl.data()};
    REQUIRE(nmp::attend_pages(g, dtype, q.data(), q.size(), pages.data(), npages, all.data(), npages, nullptr, 0, f) ==
            SPECKV_OK);
    nmp::merge_partials(uint32_t(H), g.head_dim, b, a, b);  // in place
    for (size_t i = 0; i < ref.size(); i++) {
        CHECK(std::fabs(fo[i] - ref[i]) <= 1e-5 * std::max(1.0, nrm));
        CHECK(std::fabs(bo[i] - mo[i]) <= 1e-6 * std::max(1.0, nrm));
    }
    for (size_t h = 0; h < H; h++) {
        CHECK(mm[h] == fm[h]);
        CHECK(ml[h] == doctest::Approx(fl[h]).epsilon(1e-5));
    }
}

}  // namespace

TEST_CASE("nmp: near-memory partial merged with the GPU partial equals full attention") {
    run_merge(nmp::Geometry{4, 8, 2}, SPECKV_DTYPE_FP32, 1);
    run_merge(nmp::Geometry{2, 64, 4}, SPECKV_DTYPE_FP32, 2);
    run_merge(nmp::Geometry{4, 16, 1}, SPECKV_DTYPE_FP16, 3);
    run_merge(nmp::Geometry{8, 128, 4}, SPECKV_DTYPE_FP16, 4);
}

TEST_CASE("nmp: an empty partial is the merge identity") {
    nmp::Geometry g{1, 8, 1};
    std::vector<float> k(8, 0.5f), v(8, 2.0f), q(8, 1.0f);
    nmp::PageKV pg{k.data(), v.data(), 1, 0};
    const uint32_t id = 0;
    float ao[8], am, al, bo[8], bm, bl;
    nmp::Partial a{ao, &am, &al}, b{bo, &bm, &bl};
    REQUIRE(nmp::attend_pages(g, SPECKV_DTYPE_FP32, q.data(), 8, &pg, 1, &id, 1, nullptr, 0, a) == SPECKV_OK);
    REQUIRE(nmp::attend_pages(g, SPECKV_DTYPE_FP32, q.data(), 8, &pg, 1, nullptr, 0, nullptr, 0, b) == SPECKV_OK);
    CHECK(bl == 0);
    CHECK(std::isinf(bm));
    nmp::merge_partials(1, 8, a, b, b);
    CHECK(bo[3] == 2.0f);
    CHECK(bl == al);
    CHECK(bm == am);
}

TEST_CASE("nmp: attend_pages bad input") {
    nmp::Geometry g{1, 8, 1};
    std::vector<float> k(8), v(8), q(8);
    nmp::PageKV pg{k.data(), v.data(), 1, 0};
    float o[8], m, l;
    nmp::Partial r{o, &m, &l};
    const uint32_t id = 0, bad = 1;
    CHECK(nmp::attend_pages(g, SPECKV_DTYPE_FP32, q.data(), 7, &pg, 1, &id, 1, nullptr, 0, r) == SPECKV_EINVAL);
    CHECK(nmp::attend_pages(g, SPECKV_DTYPE_BF16, q.data(), 8, &pg, 1, &id, 1, nullptr, 0, r) == SPECKV_EINVAL);
    CHECK(nmp::attend_pages(g, SPECKV_DTYPE_FP32, q.data(), 8, &pg, 1, &bad, 1, nullptr, 0, r) == SPECKV_EINVAL);
    const uint32_t off[] = {0, 2};
    CHECK(nmp::attend_pages(g, SPECKV_DTYPE_FP32, q.data(), 8, &pg, 1, &id, 1, off, 0, r) == SPECKV_EINVAL);
    nmp::PageKV empty{k.data(), v.data(), 0, 0};
    CHECK(nmp::attend_pages(g, SPECKV_DTYPE_FP32, q.data(), 8, &empty, 1, &id, 1, nullptr, 0, r) == SPECKV_EINVAL);
}
