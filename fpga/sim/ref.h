// SPDX-License-Identifier: Apache-2.0
// The C++ reference side of the RTL harness: what lib/codec/codec_ref.cc makes of a
// page (the expected record) and of a record (status and decoded bytes).
#pragma once
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "pages.h"

namespace fpga_sim {

namespace codec = speckv::codec;

struct DecJob {
    std::vector<uint8_t> rec;
    int ref_rc;                   // C++ decode() status
    std::vector<uint8_t> expect;  // C++ decoded bytes when ref_rc == 0
    bool hostile;
    uint64_t t_in = 0;            // harness: cycle its first beat went in
};

// The record the scalar reference encodes `p` to (always succeeds for valid pages).
inline std::vector<uint8_t> ref_encode(const Page &p) {
    std::vector<uint8_t> rec(codec::max_record_size(p.bytes.size()));
    size_t len = 0;
    codec::Layout lay;
    lay.channels = p.channels;
    int rc = codec::encode(codec::Mode(p.mode), p.dtype, p.bytes.data(), p.bytes.size(), lay, rec.data(), rec.size(),
                           &len, codec::Impl::scalar);
    if (rc != SPECKV_OK) {
        std::fprintf(stderr, "reference encode failed (%d) for mode %d dtype %d\n", rc, p.mode, p.dtype);
        std::exit(2);
    }
    rec.resize(len);
    return rec;
}

// The reference decode of `rec` (any bytes).
inline DecJob ref_decode(std::vector<uint8_t> rec, bool hostile) {
    DecJob j;
    j.rec = std::move(rec);
    j.hostile = hostile;
    codec::Header h;
    size_t cap = 0;
    if (codec::peek_header(j.rec.data(), j.rec.size(), &h) == SPECKV_OK) cap = h.decoded_bytes();
    std::vector<uint8_t> out(std::max<size_t>(cap, 16));
    size_t ob = 0;
    j.ref_rc = codec::decode(j.rec.data(), j.rec.size(), out.data(), out.size(), &ob, codec::Impl::scalar);
    if (j.ref_rc == SPECKV_OK) {
        out.resize(ob);
        j.expect = std::move(out);
    }
    return j;
}

// Every file of a fuzz corpus directory (none if it does not exist).
inline std::vector<std::vector<uint8_t>> read_corpus(const std::string &dir) {
    std::vector<std::vector<uint8_t>> v;
    if (dir.empty()) return v;
    DIR *d = opendir(dir.c_str());
    if (!d) return v;
    while (dirent *e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        std::string path = dir + "/" + e->d_name;
        FILE *f = std::fopen(path.c_str(), "rb");
        if (!f) continue;
        std::vector<uint8_t> b;
        uint8_t tmp[4096];
        size_t k;
        while ((k = std::fread(tmp, 1, sizeof tmp, f)) > 0) b.insert(b.end(), tmp, tmp + k);
        std::fclose(f);
        if (!b.empty() && b.size() <= (1u << 20)) v.push_back(std::move(b));
    }
    closedir(d);
    return v;
}

}  // namespace fpga_sim

namespace fpga_sim {

// One triple of `speckv codec vectors --out DIR` (docs/codec.md §12).
struct CliVector {
    std::string id, note;
    int mode_asked;  // preset id, -1 for a `sweep` record (parameter space, decoder only)
    int dtype;
    uint32_t channels;
    std::vector<uint8_t> in, rec, out;
};

inline bool read_file(const std::string &path, std::vector<uint8_t> *b) {
    FILE *f = std::fopen(path.c_str(), "rb");
    if (!f) return false;
    b->clear();
    uint8_t tmp[65536];
    size_t k;
    while ((k = std::fread(tmp, 1, sizeof tmp, f)) > 0) b->insert(b->end(), tmp, tmp + k);
    std::fclose(f);
    return true;
}

// Reads DIR/index.tsv and its triples; false (with a message) if anything is missing.
inline bool read_cli_vectors(const std::string &dir, std::vector<CliVector> *v) {
    FILE *f = std::fopen((dir + "/index.tsv").c_str(), "r");
    if (!f) {
        std::fprintf(stderr, "no %s/index.tsv\n", dir.c_str());
        return false;
    }
    char line[4096];
    bool ok = true;
    while (std::fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        std::vector<std::string> col;
        std::string cur;
        for (char *p = line; *p && *p != '\n'; p++) {
            if (*p == '\t') col.push_back(cur), cur.clear();
            else cur += *p;
        }
        col.push_back(cur);
        if (col.size() < 10) { ok = false; break; }
        CliVector c;
        c.id = col[0];
        codec::Mode m;
        if (col[1] == "sweep") {
            c.mode_asked = -1;  // §12 parameter sweep: a record with any b/group/order/entropy (decoder only)
        } else if (codec::mode_from_name(col[1].c_str(), &m)) {
            c.mode_asked = int(m);
        } else {
            std::fprintf(stderr, "%s: unknown mode %s\n", c.id.c_str(), col[1].c_str());
            ok = false;
            break;
        }
        c.dtype = std::atoi(col[2].c_str());
        c.channels = uint32_t(std::strtoul(col[4].c_str(), nullptr, 10));
        c.note = col[9];
        std::string b = dir + "/" + c.id;
        if (!read_file(b + ".in", &c.in) || !read_file(b + ".rec", &c.rec) || !read_file(b + ".out", &c.out)) {
            ok = false;
            break;
        }
        v->push_back(std::move(c));
    }
    std::fclose(f);
    if (!ok) std::fprintf(stderr, "bad vector set in %s\n", dir.c_str());
    return ok;
}

}  // namespace fpga_sim
