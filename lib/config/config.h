// SPDX-License-Identifier: Apache-2.0
// Settings: one table of keys (name, type, bounds, default, doc), shared by the
// setters of the C API and the TOML loader; README.md's configuration table is
// made from it (tools/config_doc, checked by CTest config_table).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "speckv.h"

namespace speckv {

struct KeySpec {
    const char *name;
    int64_t min, max, dflt;
    const char *doc;
    // String keys accept one of `choices` ("a|b|c"); their int value is the index.
    const char *choices = nullptr;
    // A text key (a path): set with set_str, read with get_str; min/max/dflt unused.
    bool text = false;
    // README's default and bounds cells when the numbers alone mislead (a
    // value that means "unset", a constraint beyond [min, max]).
    const char *shown_default = nullptr;
    const char *shown_bounds = nullptr;
};

const std::vector<KeySpec> &config_keys();
const KeySpec *find_key(std::string_view name);

class Config {
  public:
    Config();
    int set_int(std::string_view key, int64_t v);
    int set_str(std::string_view key, std::string_view v);
    int get_int(std::string_view key, int64_t *v) const;
    int64_t get(std::string_view key) const;  // key must exist
    // A text key's value ("" when unset).
    std::string get_str(std::string_view key) const;
    bool is_set(std::string_view key) const { return explicit_.count(std::string(key)) != 0; }
    int load_toml_text(std::string_view text, const char *origin);
    int load_toml_file(const char *path);

    speckv_log_fn log_fn = nullptr;
    void *log_user = nullptr;

  private:
    std::map<std::string, int64_t> values_;
    std::map<std::string, bool> explicit_;
    std::map<std::string, std::string> strings_;  // text keys
};

}  // namespace speckv

struct speckv_config {
    speckv::Config rep;
};
