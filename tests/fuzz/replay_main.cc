// SPDX-License-Identifier: Apache-2.0
// Replays a libFuzzer target (LLVMFuzzerTestOneInput) over the files and
// directories given on the command line: every regular file, recursively, in
// sorted order. So every fuzz target builds and runs in plain CI builds
// without libFuzzer; the `fuzz` preset links the targets with
// -fsanitize=fuzzer instead of this file (tests/fuzz/README.md).
// Exit 0 when every input ran; 1 for a path that does not exist, a file that
// cannot be read, or no input at all. A crash is the failure signal.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace {

bool collect(const std::string &p, std::vector<std::string> *out) {
    struct stat st;
    if (stat(p.c_str(), &st) != 0) {
        std::fprintf(stderr, "fuzz replay: no such path %s\n", p.c_str());
        return false;
    }
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(p.c_str());
        if (!d) {
            std::fprintf(stderr, "fuzz replay: cannot open directory %s\n", p.c_str());
            return false;
        }
        bool ok = true;
        while (dirent *e = readdir(d)) {
            const std::string n = e->d_name;
            if (n != "." && n != "..") ok &= collect(p + "/" + n, out);
        }
        closedir(d);
        return ok;
    }
    if (S_ISREG(st.st_mode)) out->push_back(p);
    return true;
}

bool read_file(const std::string &path, std::vector<uint8_t> *buf) {
    FILE *fp = std::fopen(path.c_str(), "rb");
    if (!fp) return false;
    uint8_t tmp[65536];
    size_t got;
    while ((got = std::fread(tmp, 1, sizeof tmp, fp)) > 0) buf->insert(buf->end(), tmp, tmp + got);
    const bool ok = !std::ferror(fp);
    std::fclose(fp);
    return ok;
}

}  // namespace

int main(int argc, char **argv) {
    std::vector<std::string> files;
    bool ok = true;
    for (int i = 1; i < argc; i++) ok &= collect(argv[i], &files);
    std::sort(files.begin(), files.end());
    if (!ok) return 1;
    if (files.empty()) {
        std::fprintf(stderr, "fuzz replay: no inputs\n");
        return 1;
    }
    for (const auto &f : files) {
        std::vector<uint8_t> buf;
        if (!read_file(f, &buf)) {
            std::fprintf(stderr, "fuzz replay: cannot read %s\n", f.c_str());
            return 1;
        }
        LLVMFuzzerTestOneInput(buf.data(), buf.size());
    }
    std::printf("fuzz replay: %zu inputs ok\n", files.size());
    return 0;
}
