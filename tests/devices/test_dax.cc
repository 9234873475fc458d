// SPDX-License-Identifier: Apache-2.0
// dax: backend. No device-dax hardware here, so (docs/devices.md):
//  * the libdaxctl lookup runs against the real library, which finds no
//    device: the "no device" and "not a dax device" errors are checked;
//  * the mapping step (map_dax_fd: size/alignment checks, aligned reservation,
//    MAP_SHARED_VALIDATE|MAP_SYNC with its MAP_SHARED fallback) and the pool
//    code that runs on its result run on a memfd stand-in.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "discovery.h"
#include "pool/pool.h"
#include "speckv.h"
#include "util.h"

using namespace speckv;

namespace {
constexpr uint64_t MiB = 1u << 20;

bool fd_open(int fd) { return fcntl(fd, F_GETFD) != -1; }

bool machine_has_dax() {
    DeviceReport r;
    discover_devices(false, &r);
    for (auto &g : r.regions)
        if (!g.devices.empty()) return true;
    return false;
}
}  // namespace

TEST_SUITE("dax") {

TEST_CASE("lookup through libdaxctl: an absent device is ENOENT naming what libdaxctl sees") {
    Mapping m;
    int rc = Mapping::open_dax("/dev/dax987.3", true, &m);
    CHECK(rc == SPECKV_ENOENT);
    CHECK(err().find("no device-dax device at /dev/dax987.3") != std::string::npos);
    if (!machine_has_dax()) CHECK(err().find("libdaxctl finds no dax devices on this machine") != std::string::npos);
    CHECK(m.base() == nullptr);
    DaxDevice d;
    if (!machine_has_dax()) CHECK(find_dax_device("/dev/dax0.0", &d) == SPECKV_ENOENT);
}

TEST_CASE("paths that are not dax devices are refused by kind, nothing written") {
    Mapping m;
    CHECK(Mapping::open_dax("/dev/null", true, &m) == SPECKV_EINVAL);
    CHECK(err().find("/dev/null is character device 1:3 (class mem), not a device-dax device") != std::string::npos);
    CHECK(Mapping::open_dax("/dev", false, &m) == SPECKV_EINVAL);
    CHECK(err().find("a directory") != std::string::npos);

    std::string f = dev_test_dir() + "/not-a-device-" + std::to_string(getpid());
    std::string content(3 * MiB, 'x');
    {
        int fd = open(f.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
        REQUIRE(fd >= 0);
        REQUIRE(write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()));
        close(fd);
    }
    CHECK(Mapping::open_dax(f, true, &m) == SPECKV_EINVAL);
    CHECK(err().find("is a regular file, not a device-dax character device (for a pool in a file use file:)") !=
          std::string::npos);
    // Through every entry point that takes a dax: URI.
    speckv_pool *p = nullptr;
    CHECK(speckv_pool_open(("dax:" + f).c_str(), nullptr, &p) == SPECKV_EINVAL);
    CHECK(p == nullptr);
    std::unique_ptr<Pool> ro;
    CHECK(Pool::open_readonly_uri("dax:" + f, &ro) == SPECKV_EINVAL);
    CHECK(Pool::reset_uri("dax:" + f) == SPECKV_EINVAL);
    CHECK(slurp(f) == content);
    unlink(f.c_str());

    CHECK(speckv_pool_open("dax:/dev/null", nullptr, &p) == SPECKV_EINVAL);
    CHECK(speckv_pool_open("dax:/dev/dax987.3", nullptr, &p) == SPECKV_ENOENT);
    CHECK(Pool::open_readonly_uri("dax:/dev/dax987.3", &ro) == SPECKV_ENOENT);
    CHECK(Pool::reset_uri("dax:/dev/dax987.3") == SPECKV_ENOENT);
    CHECK(p == nullptr);
}

TEST_CASE("map_dax_fd refuses bad sizes and alignments before mapping, and closes the fd") {
    Mapping m;
    struct Case {
        uint64_t file, size, align;
        const char *msg;
    } cases[] = {
        {2 * MiB, 2 * MiB, 2 * MiB, "too small for a speckv pool"},
        {MiB, 4096, 4096, "too small for a speckv pool"},
        {8 * MiB, 6 * MiB + 4096, 2 * MiB, "is not a multiple of its alignment 2097152"},
        {8 * MiB, 8 * MiB, 3000, "alignment 3000 is not a power of two"},
        {8 * MiB, 8 * MiB, 2048, "alignment 2048 is not a power of two of at least 4 KiB"},
        {4 * MiB, 8 * MiB, 2 * MiB, "fewer than the 8388608 to map"},
    };
    for (auto &c : cases) {
        CAPTURE(c.msg);
        int fd = standin_fd(c.file, 0x5a);
        REQUIRE(fd >= 0);
        CHECK(map_dax_fd(fd, c.size, c.align, true, "standin", &m) == SPECKV_EINVAL);
        CHECK(err().find(c.msg) != std::string::npos);
        CHECK(!fd_open(fd));
        CHECK(m.base() == nullptr);
    }
}

TEST_CASE("map_dax_fd maps whole, aligned, shared; MAP_SYNC falls back on a memfd") {
    for (uint64_t align : {uint64_t(4096), 2 * MiB, uint64_t(1) << 30}) {
        CAPTURE(align);
        uint64_t size = align == (uint64_t(1) << 30) ? align : 8 * MiB;
        int fd = standin_fd(size, 0);
        REQUIRE(fd >= 0);
        Mapping m;
        DaxMapResult res;
        res.map_sync = true;
        REQUIRE(map_dax_fd(fd, size, align, true, "standin", &m, &res) == SPECKV_OK);
        CHECK(m.size() == size);
        CHECK(reinterpret_cast<uintptr_t>(m.base()) % std::max<uint64_t>(align, 2 * MiB) == 0);
        CHECK(m.shared());
        CHECK(m.writable());
        CHECK(!res.map_sync);  // shmem does not support MAP_SYNC: the fallback ran
        CHECK(m.path() == "standin");
        // Shared: a store through the mapping is in the file.
        m.base()[size - 1] = 0x7e;
        unsigned char b = 0;
        CHECK(pread(fd, &b, 1, static_cast<off_t>(size - 1)) == 1);
        CHECK(b == 0x7e);
    }
    // Read-only, as `pool inspect` maps a device.
    int fd = standin_fd(4 * MiB, 0x11);
    Mapping ro;
    REQUIRE(map_dax_fd(fd, 4 * MiB, 2 * MiB, false, "standin", &ro) == SPECKV_OK);
    CHECK(!ro.writable());
    CHECK(ro.base()[4 * MiB - 1] == 0x11);
}

TEST_CASE("map_dax_fd: a device held exclusively is busy; shared holders coexist") {
    int fd = standin_fd(4 * MiB, 0);
    REQUIRE(fd >= 0);
    // Another open file description of the same memory, as another process has.
    std::string self = "/proc/self/fd/" + std::to_string(fd);
    int other = open(self.c_str(), O_RDWR | O_CLOEXEC);
    REQUIRE(other >= 0);
    REQUIRE(flock(other, LOCK_EX | LOCK_NB) == 0);
    Mapping m;
    CHECK(map_dax_fd(dup(fd), 4 * MiB, 2 * MiB, true, "standin", &m) == SPECKV_EBUSY);
    CHECK(err().find("standin is busy: another process holds it exclusively") != std::string::npos);
    CHECK(m.base() == nullptr);
    REQUIRE(flock(other, LOCK_UN) == 0);
    Mapping a, b;
    CHECK(map_dax_fd(open(self.c_str(), O_RDWR | O_CLOEXEC), 4 * MiB, 2 * MiB, true, "standin", &a) == SPECKV_OK);
    CHECK(map_dax_fd(open(self.c_str(), O_RDWR | O_CLOEXEC), 4 * MiB, 2 * MiB, false, "standin", &b) == SPECKV_OK);
    CHECK(flock(other, LOCK_EX | LOCK_NB) != 0);  // the mappings hold it shared
    a.reset();
    b.reset();
    CHECK(flock(other, LOCK_EX | LOCK_NB) == 0);
    close(other);
    close(fd);
}

TEST_CASE("the dax pool path on a stand-in: format over garbage, attach, round trip, inspect, check") {
    const uint64_t size = 16 * MiB;
    int fd = standin_fd(size, 0xa5);  // a device holds old bytes, not zeros
    REQUIRE(fd >= 0);
    int keep = dup(fd);
    REQUIRE(keep >= 0);
    Mapping m;
    REQUIRE(map_dax_fd(fd, size, 2 * MiB, true, "standin", &m) == SPECKV_OK);
    uint64_t magic;
    std::memcpy(&magic, m.base(), 8);
    REQUIRE(magic != fmt::kMagic);
    // What Pool::open does for a dax: device without a pool.
    REQUIRE(format_pool(m.base(), m.size(), 4096, 0, /*zeroed=*/false) == SPECKV_OK);
    m.reset();

    // Attach through the ordinary open path (same memory, reopened by fd).
    std::string uri = "file:/proc/self/fd/" + std::to_string(keep);
    speckv_pool *p = nullptr;
    REQUIRE(speckv_pool_open(uri.c_str(), nullptr, &p) == SPECKV_OK);
    std::string payload(3 * 4096 + 17, '\0');
    for (size_t i = 0; i < payload.size(); i++) payload[i] = static_cast<char>(i * 31 + 7);
    speckv_handle h = 0;
    REQUIRE(speckv_alloc(p, payload.size(), SPECKV_DTYPE_OPAQUE, nullptr, &h) == SPECKV_OK);
    REQUIRE(speckv_write(p, h, 0, payload.data(), payload.size()) == SPECKV_OK);
    std::string back(payload.size(), '\0');
    REQUIRE(speckv_access(p, h, 0, back.data(), back.size(), SPECKV_ACCESS_DEFAULT) == SPECKV_OK);
    CHECK(back == payload);
    CHECK(speckv_pool_close(p) == SPECKV_OK);

    // Inspect and check through a fresh dax-style mapping, as `pool inspect dax:` does.
    Mapping again;
    REQUIRE(map_dax_fd(dup(keep), size, 2 * MiB, false, "standin", &again) == SPECKV_OK);
    std::unique_ptr<Pool> img;
    REQUIRE(Pool::open_image(std::move(again), &img) == SPECKV_OK);
    PoolInfo info;
    img->info(&info);
    CHECK(info.pool_bytes == size);
    CHECK(info.blocks_live == 1);
    CHECK(info.clean);
    CheckReport rep;
    REQUIRE(img->check(&rep) == SPECKV_OK);
    CHECK(rep.problems.empty());
    std::vector<BlockInfo> blocks;
    REQUIRE(img->list_blocks(&blocks) == SPECKV_OK);
    REQUIRE(blocks.size() == 1);
    const unsigned char *data = img->image() + info.data_off + blocks[0].first_page * info.page_size;
    CHECK(std::memcmp(data, payload.data(), payload.size()) == 0);
    close(keep);
}

TEST_CASE("a stand-in pool with a different page size keeps its own geometry") {
    const uint64_t size = 8 * MiB;
    int fd = standin_fd(size, 0xff);
    Mapping m;
    REQUIRE(map_dax_fd(fd, size, 2 * MiB, true, "standin", &m) == SPECKV_OK);
    REQUIRE(format_pool(m.base(), m.size(), 65536, 0, false) == SPECKV_OK);
    std::unique_ptr<Pool> img;
    REQUIRE(Pool::open_image(std::move(m), &img) == SPECKV_OK);
    PoolInfo info;
    img->info(&info);
    CHECK(info.page_size == 65536);
}

// Hardware only, and destructive: SPECKV_TEST_DAX=/dev/daxX.Y formats that
// device. Its own suite, run by the CTest test `devices_dax_hw` (main.cc
// --requires=dax), which reports itself skipped without such a device
// (docs/devices.md, validation).
static const char *real_dax() {
    const char *e = std::getenv("SPECKV_TEST_DAX");
    return e && *e ? e : nullptr;
}

TEST_CASE("real device-dax: lookup, MAP_SYNC, pool round trip (SPECKV_TEST_DAX)" * doctest::test_suite("dax-hw")) {
    REQUIRE_MESSAGE(real_dax(), "SPECKV_TEST_DAX is not set (run through `ctest -R devices_dax_hw`)");
    const std::string dev = real_dax();
    DaxDevice d;
    REQUIRE_MESSAGE(find_dax_device(dev, &d) == SPECKV_OK, err());
    CHECK(d.mode == "devdax");
    int fd = open(dev.c_str(), O_RDWR | O_CLOEXEC);
    REQUIRE(fd >= 0);
    Mapping m;
    DaxMapResult res;
    REQUIRE_MESSAGE(map_dax_fd(fd, d.size, d.align, true, dev, &m, &res) == SPECKV_OK, err());
    CHECK(res.map_sync);  // device-dax supports MAP_SYNC
    m.reset();
    speckv_pool *p = nullptr;
    REQUIRE_MESSAGE(speckv_pool_open(("dax:" + dev).c_str(), nullptr, &p) == SPECKV_OK, err());
    std::string payload(5000, 'k');
    speckv_handle h = 0;
    REQUIRE(speckv_alloc(p, payload.size(), SPECKV_DTYPE_OPAQUE, nullptr, &h) == SPECKV_OK);
    REQUIRE(speckv_write(p, h, 0, payload.data(), payload.size()) == SPECKV_OK);
    std::string back(payload.size(), '\0');
    REQUIRE(speckv_access(p, h, 0, back.data(), back.size(), SPECKV_ACCESS_DEFAULT) == SPECKV_OK);
    CHECK(back == payload);
    CHECK(speckv_free(p, h) == SPECKV_OK);
    CHECK(speckv_pool_close(p) == SPECKV_OK);
    std::unique_ptr<Pool> ro;
    REQUIRE(Pool::open_readonly_uri("dax:" + dev, &ro) == SPECKV_OK);
    CheckReport rep;
    REQUIRE(ro->check(&rep) == SPECKV_OK);
    CHECK(rep.problems.empty());
}

}  // TEST_SUITE

TEST_CASE("openers racing on a blank device: exactly one formats it, the others find its pool") {
    const uint64_t size = 16 * MiB;
    int fd = standin_fd(size, 0x3c);  // old bytes, no pool
    REQUIRE(fd >= 0);
    int go[2];
    REQUIRE(pipe(go) == 0);
    constexpr int kOpeners = 4;
    pid_t kids[kOpeners];
    for (int i = 0; i < kOpeners; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {
            close(go[1]);
            char c;
            if (read(go[0], &c, 1) != 0) _exit(3);  // released together when the parent closes the pipe
            // Its own open file description, as a separate open(2) of the device gives.
            int own = open(("/proc/self/fd/" + std::to_string(fd)).c_str(), O_RDWR | O_CLOEXEC);
            Mapping m;
            if (own < 0 || map_dax_fd(own, size, 2 * MiB, true, "standin", &m) != SPECKV_OK) _exit(4);
            bool formatted = false;
            if (format_if_blank(m, 4096, 0, true, &formatted) != SPECKV_OK) _exit(5);
            _exit(formatted ? 10 : 0);
        }
    }
    close(go[0]);
    close(go[1]);
    int formatters = 0;
    for (pid_t k : kids) {
        int st;
        REQUIRE(waitpid(k, &st, 0) == k);
        REQUIRE(WIFEXITED(st));
        REQUIRE((WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 10));
        formatters += WEXITSTATUS(st) == 10;
    }
    CHECK(formatters == 1);
    Mapping again;
    REQUIRE(map_dax_fd(fd, size, 2 * MiB, false, "standin", &again) == SPECKV_OK);
    std::unique_ptr<Pool> img;
    REQUIRE(Pool::open_image(std::move(again), &img) == SPECKV_OK);
    CheckReport rep;
    img->check(&rep);
    CHECK(rep.problems.empty());
    // And a device with a pool is left alone; without create it is not a pool.
    bool formatted = true;
    int fd2 = standin_fd(size, 0x11);
    Mapping blank;
    REQUIRE(map_dax_fd(fd2, size, 2 * MiB, true, "standin", &blank) == SPECKV_OK);
    CHECK(format_if_blank(blank, 4096, 0, false, &formatted) == SPECKV_ENOTPOOL);
    CHECK(!formatted);
}
