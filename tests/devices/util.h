// SPDX-License-Identifier: Apache-2.0
// Helpers for the device tests.
#pragma once
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "util/status.h"

inline std::string dev_test_dir() {
    const char *d = std::getenv("SPECKV_TEST_TMP");
    std::string dir = d && *d ? d : "/tmp/speckv-devices";
    mkdir(dir.c_str(), 0700);
    return dir;
}

// A memfd of `size` bytes, every byte `fill` (a device holds whatever it held).
inline int standin_fd(size_t size, unsigned char fill) {
    int fd = memfd_create("speckv-dax-standin", MFD_CLOEXEC);
    if (fd < 0) return -1;
    if (ftruncate(fd, static_cast<off_t>(size)) != 0) return -1;
    if (fill) {
        std::vector<unsigned char> b(1 << 20, fill);
        for (size_t off = 0; off < size; off += b.size())
            if (pwrite(fd, b.data(), std::min(b.size(), size - off), static_cast<off_t>(off)) < 0) return -1;
    }
    return fd;
}

inline std::string slurp(const std::string &path) {
    std::string s;
    int fd = open(path.c_str(), O_RDONLY);
    if (fd < 0) return s;
    char b[4096];
    ssize_t n;
    while ((n = read(fd, b, sizeof b)) > 0) s.append(b, static_cast<size_t>(n));
    close(fd);
    return s;
}

inline std::string err() { return speckv::last_error(); }
