// SPDX-License-Identifier: Apache-2.0
// Writes a damaged pool file for the CLI tests (tests/cli/run.sh): a 4 MiB
// pool, closed cleanly, whose one packed block has the directory entry of its
// first page flagged both zero page and coded, length 0, offset 0xF0000000 —
// the pool of issue 28 that made `speckv pool inspect` and `pool stats` read
// 4 GiB past the image and die of SIGSEGV. Everything else (superblock, block
// record, page checksums) is valid, so only the image's own checks see it.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "config/config.h"
#include "pool/pool.h"
#include "pool/pool_format.h"
#include "speckv.h"
#include "util/status.h"

using namespace speckv;

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s POOL_FILE\n", argv[0]);
        return 2;
    }
    const std::string path = argv[1];
    uint64_t entry_at = 0;
    {
        Config cfg;
        std::unique_ptr<Pool> p;
        if (cfg.set_str("pool.size", "4M") != SPECKV_OK || cfg.set_str("codec.mode", "int8") != SPECKV_OK ||
            Pool::open("file:" + path, cfg, &p) != SPECKV_OK) {
            std::fprintf(stderr, "cannot create %s: %s\n", path.c_str(), last_error());
            return 1;
        }
        // Four FP16 pages of smooth values: coded, then packed when the write completes the block.
        std::vector<uint16_t> kv(4 * 2048);
        for (size_t i = 0; i < kv.size(); i++) kv[i] = static_cast<uint16_t>(0x3800 + (i % 64) * 3);
        uint64_t h = 0;
        if (p->alloc(kv.size() * 2, SPECKV_DTYPE_FP16, nullptr, &h) != SPECKV_OK ||
            p->write(h, 0, kv.data(), kv.size() * 2) != SPECKV_OK) {
            std::fprintf(stderr, "cannot write the block: %s\n", last_error());
            return 1;
        }
        std::vector<BlockInfo> blocks;
        PoolInfo info;
        p->info(&info);
        if (p->list_blocks(&blocks) != SPECKV_OK || blocks.size() != 1 || !blocks[0].packed_pages) {
            std::fprintf(stderr, "the block was not packed\n");
            return 1;
        }
        entry_at = info.data_off + blocks[0].first_page * info.page_size + sizeof(fmt::PackHead);
    }  // closed cleanly
    const fmt::PackEntry e{0xF0000000u, 0, fmt::kPageZero | fmt::kPageCoded, 0};
    const int fd = ::open(path.c_str(), O_WRONLY);
    if (fd < 0 || pwrite(fd, &e, sizeof e, static_cast<off_t>(entry_at)) != ssize_t(sizeof e) || close(fd) != 0) {
        std::perror(path.c_str());
        return 1;
    }
    return 0;
}
