// Replays a fuzz target over corpus files or directories, so the targets
// build and run in plain CI without libFuzzer (build with clang
// -fsanitize=fuzzer and without this file to fuzz for real).
#include <dirent.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
        return 1;
    }
    std::vector<uint8_t> buf((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(buf.data(), buf.size());
    return 0;
}

int main(int argc, char **argv) {
    int files = 0, errors = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            std::fprintf(stderr, "replay: no such path %s\n", argv[i]);
            return 1;
        }
        if (S_ISDIR(st.st_mode)) {
            DIR *d = opendir(argv[i]);
            while (dirent *e = readdir(d)) {
                if (e->d_name[0] == '.') continue;
                errors += run_file(std::string(argv[i]) + "/" + e->d_name);
                files++;
            }
            closedir(d);
        } else {
            errors += run_file(argv[i]);
            files++;
        }
    }
    std::printf("replayed %d inputs\n", files);
    return errors || files == 0 ? 1 : 0;
}
