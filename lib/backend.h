// Pool backends: where the pool's single mapping comes from. A backend knows
// nothing of the pool format; it hands back bytes that are mapped.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace speckv {

// One mapping, owned (RAII). For files, the descriptor stays open while mapped.
class Mapping {
  public:
    Mapping() = default;
    ~Mapping();
    Mapping(const Mapping &) = delete;
    Mapping &operator=(const Mapping &) = delete;
    Mapping(Mapping &&o) noexcept { *this = std::move(o); }
    Mapping &operator=(Mapping &&o) noexcept;

    unsigned char *base() const { return base_; }
    size_t size() const { return size_; }
    bool shared() const { return shared_; }      // visible to other processes
    bool writable() const { return writable_; }
    const std::string &path() const { return path_; }
    int fd() const { return fd_; }  // -1 for anonymous memory
    void reset();

    // Opens an existing file. writable=false maps it read-only (inspect).
    static int open_file(const std::string &path, bool writable, Mapping *out);
    // Creates `path` with `size` bytes, calls init(base, size) on the new
    // mapping, and publishes it under `path` only when init succeeded (written
    // under a temporary name, then link(2)ed: no process ever sees a half-made
    // pool). Returns SPECKV_EEXIST if another process published first.
    template <typename Init>
    static int create_file(const std::string &path, size_t size, Init &&init, Mapping *out);
    // Private anonymous memory.
    static int open_anon(size_t size, Mapping *out);
    // A device-dax character device (/dev/daxX.Y), found and checked with
    // libdaxctl (mode devdax, size, alignment), mapped whole with MAP_SHARED
    // (MAP_SYNC where supported). lib/backend_dax.cc.
    static int open_dax(const std::string &path, bool writable, Mapping *out);
    // Anonymous memory of `size` bytes bound to NUMA node `node` with libnuma
    // (policy 0 = bind, 1 = preferred), placement verified. lib/backend_numa.cc.
    static int open_numa(int node, size_t size, int policy, Mapping *out);

    // Adopts an existing mapping (for backends in other files).
    static Mapping adopt(unsigned char *base, size_t size, int fd, bool shared, bool writable, std::string path);

  private:
    static int create_file_impl(const std::string &path, size_t size, int (*init)(void *, unsigned char *, size_t),
                                void *ctx, Mapping *out);
    unsigned char *base_ = nullptr;
    size_t size_ = 0;
    int fd_ = -1;
    bool shared_ = false;
    bool writable_ = false;
    std::string path_;
};

template <typename Init>
int Mapping::create_file(const std::string &path, size_t size, Init &&init, Mapping *out) {
    using F = std::remove_reference_t<Init>;
    auto thunk = [](void *ctx, unsigned char *b, size_t n) -> int { return (*static_cast<F *>(ctx))(b, n); };
    return create_file_impl(path, size, thunk, const_cast<void *>(static_cast<const void *>(&init)), out);
}

}  // namespace speckv
