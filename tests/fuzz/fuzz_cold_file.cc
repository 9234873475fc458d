// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the L4 cold tier's file (lib/tiers/cold_tier.cc), as recovery finds
// it after a crash or a hostile edit. The input is the file (512-byte blocks);
// the tier opens it with recover=true, then every key it recovered is read
// back. Promises checked: no crash; a recovered key's length fits the file;
// a get returns OK or a status code, and an OK copy is exactly its length.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "cold_file_options.h"
#include "tiers/cold_tier.h"
#include "speckv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 20)) return 0;  // the tier's capacity below
    const char *tmp = std::getenv("TMPDIR");
    std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/speckv-fuzz-cold-XXXXXX";
    int fd = mkstemp(path.data());
    if (fd < 0) return 0;
    bool ok = write(fd, data, size) == ssize_t(size);
    close(fd);
    if (ok) {
        const speckv::ColdTierOptions o = fuzz_cold_file_options(path);
        std::unique_ptr<speckv::ColdTier> t;
        if (speckv::ColdTier::open(o, &t) == SPECKV_OK) {
            for (uint64_t k : t->keys()) {
                const int64_t len = t->length(k);
                if (len < 0 || uint64_t(len) > size) std::abort();  // a key the file cannot hold
                std::vector<unsigned char> buf(size_t(len) + 1);
                speckv::ColdTier::GetItem it{k, buf.data(), buf.size()};
                int rc = t->get({&it, 1});
                if (rc == SPECKV_OK && it.len != size_t(len)) std::abort();
            }
        }
    }
    unlink(path.c_str());
    return 0;
}
