// Replays a libFuzzer target over files and directories given on the command
// line (every regular file, sorted), so fuzz targets run in plain CI builds.
// Exit 0 when all inputs ran; a crash is the failure signal.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void collect(const std::string &p, std::vector<std::string> *out) {
    struct stat st;
    if (stat(p.c_str(), &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(p.c_str());
        if (!d) return;
        while (dirent *e = readdir(d)) {
            std::string n = e->d_name;
            if (n != "." && n != "..") collect(p + "/" + n, out);
        }
        closedir(d);
    } else if (S_ISREG(st.st_mode)) {
        out->push_back(p);
    }
}

int main(int argc, char **argv) {
    std::vector<std::string> files;
    for (int i = 1; i < argc; i++) collect(argv[i], &files);
    std::sort(files.begin(), files.end());
    if (files.empty()) {
        std::fprintf(stderr, "fuzz replay: no inputs\n");
        return 1;
    }
    for (const auto &f : files) {
        FILE *fp = std::fopen(f.c_str(), "rb");
        if (!fp) return 1;
        std::vector<uint8_t> buf;
        uint8_t tmp[65536];
        size_t got;
        while ((got = std::fread(tmp, 1, sizeof tmp, fp)) > 0) buf.insert(buf.end(), tmp, tmp + got);
        std::fclose(fp);
        LLVMFuzzerTestOneInput(buf.data(), buf.size());
    }
    std::printf("fuzz replay: %zu inputs ok\n", files.size());
    return 0;
}
