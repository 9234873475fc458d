// SPDX-License-Identifier: Apache-2.0
// The SPECKV_ISA cap (lib/util/cpu.h) takes effect in every dispatcher of the library: the codec's
// tables, the selection kernels and CRC32C. tests/isa_run.sh runs this executable once per
// level, so each run checks the cap it was given.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "codec/codec.h"
#include "util/cpu.h"
#include "util/crc32c.h"
#include "select/nmp.h"

namespace c = speckv::codec;
namespace cpu = speckv::cpu;

namespace {

bool cpuinfo_has(const char *flag) {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("flags", 0) == 0) return (line + " ").find(std::string(" ") + flag + " ") != std::string::npos;
    return false;
}

}  // namespace

TEST_CASE("dispatch: SPECKV_ISA caps every kernel table of the library") {
    const char *env = std::getenv("SPECKV_ISA");
    const std::string want = env && *env ? env : "native";
    CHECK(std::string(cpu::cap_name()) == want);
    if (want == "baseline") {
        CHECK(cpu::features() == 0u);
        CHECK_FALSE(c::impl_available(c::Impl::avx2));
        CHECK_FALSE(c::impl_available(c::Impl::avx512));
        CHECK_FALSE(speckv::nmp::impl_available(speckv::nmp::Impl::avx2));
        CHECK_FALSE(speckv::nmp::impl_available(speckv::nmp::Impl::avx512));
        CHECK(speckv::crc32c_active_path() == speckv::Crc32cPath::portable);
    } else if (want == "avx2") {
        CHECK_FALSE(cpu::has(cpu::kAvx512f));
        CHECK_FALSE(c::impl_available(c::Impl::avx512));
        CHECK_FALSE(speckv::nmp::impl_available(speckv::nmp::Impl::avx512));
        CHECK(speckv::crc32c_active_path() != speckv::Crc32cPath::vpclmul);
        if (cpuinfo_has("avx2") && cpuinfo_has("f16c") && cpuinfo_has("fma")) {
            CHECK(c::impl_available(c::Impl::avx2));
            CHECK(speckv::nmp::impl_available(speckv::nmp::Impl::avx2));
        }
    } else {
        // Native: the probe agrees with what the kernel reports for this CPU.
        CHECK(cpu::has(cpu::kAvx2) == cpuinfo_has("avx2"));
        CHECK(cpu::has(cpu::kAvx512f) == cpuinfo_has("avx512f"));
        CHECK(cpu::has(cpu::kAvx512bw) == cpuinfo_has("avx512bw"));
        CHECK(cpu::has(cpu::kVpclmulqdq) == cpuinfo_has("vpclmulqdq"));
        CHECK(c::impl_available(c::Impl::avx512) ==
              (cpuinfo_has("avx512f") && cpuinfo_has("avx512bw") && cpuinfo_has("avx512vl")));
    }
}
