// SPDX-License-Identifier: Apache-2.0
// Trace readers and writers: Mooncake JSONL, Azure CSV, the native format.
// Strict: every malformed line is an error naming its line, or (skip_bad) a
// counted skip. Lines are streamed; nothing but the current line is kept.
#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "mooncake_json.h"
#include "trace.h"

namespace speckv_trace {

const char *format_name(Format f) {
    switch (f) {
    case Format::Mooncake: return "mooncake";
    case Format::Azure: return "azure";
    case Format::Native: return "native";
    default: return "auto";
    }
}

bool parse_format(const std::string &s, Format *out) {
    static const struct { const char *n; Format f; } t[] = {
        {"auto", Format::Auto}, {"mooncake", Format::Mooncake}, {"azure", Format::Azure}, {"native", Format::Native}};
    for (auto &e : t)
        if (s == e.n) return *out = e.f, true;
    return false;
}

namespace {

// ----- a small strict JSON reader, enough for one Mooncake object per line:
// objects, arrays, numbers, strings (validated, escapes checked), true/false/null.
class Json {
  public:
    explicit Json(std::string_view s) : s_(s) {}
    std::string err;

    void ws() {
        while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\t' || s_[p_] == '\r' || s_[p_] == '\n')) ++p_;
    }
    bool at_end() { ws(); return p_ == s_.size(); }
    bool eat(char c) {
        ws();
        if (p_ < s_.size() && s_[p_] == c) return ++p_, true;
        return false;
    }
    bool expect(char c) {
        if (eat(c)) return true;
        return fail(std::string("expected '") + c + "' at column " + std::to_string(col()));
    }
    bool fail(const std::string &m) {
        if (err.empty()) err = m;
        return false;
    }
    size_t col() const { return p_ + 1; }

    bool string(std::string *out) {
        ws();
        if (p_ >= s_.size() || s_[p_] != '"') return fail("expected a string at column " + std::to_string(col()));
        ++p_;
        out->clear();
        while (p_ < s_.size()) {
            unsigned char c = static_cast<unsigned char>(s_[p_++]);
            if (c == '"') return true;
            if (c < 0x20) return fail("control character in a string at column " + std::to_string(p_));
            if (c == '\\') {
                if (p_ >= s_.size()) break;
                char e = s_[p_++];
                if (e == 'u') {
                    for (int i = 0; i < 4; ++i, ++p_)
                        if (p_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[p_])))
                            return fail("bad \\u escape at column " + std::to_string(p_ + 1));
                    out->push_back('?');
                } else if (std::strchr("\"\\/bfnrt", e)) {
                    out->push_back(e);
                } else {
                    return fail("bad escape at column " + std::to_string(p_));
                }
            } else {
                out->push_back(static_cast<char>(c));
            }
        }
        return fail("unterminated string");
    }

    // A JSON number. *is_int: no fraction/exponent and fits int64.
    bool number(double *d, int64_t *i, bool *is_int) {
        ws();
        size_t b = p_;
        if (p_ < s_.size() && s_[p_] == '-') ++p_;
        if (p_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[p_])))
            return fail("expected a number at column " + std::to_string(b + 1));
        if (s_[p_] == '0' && p_ + 1 < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p_ + 1])))
            return fail("leading zero in a number at column " + std::to_string(b + 1));
        while (p_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p_]))) ++p_;
        bool integral = true;
        if (p_ < s_.size() && s_[p_] == '.') {
            integral = false;
            ++p_;
            if (p_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[p_])))
                return fail("bad number at column " + std::to_string(b + 1));
            while (p_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p_]))) ++p_;
        }
        if (p_ < s_.size() && (s_[p_] == 'e' || s_[p_] == 'E')) {
            integral = false;
            ++p_;
            if (p_ < s_.size() && (s_[p_] == '+' || s_[p_] == '-')) ++p_;
            if (p_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[p_])))
                return fail("bad number at column " + std::to_string(b + 1));
            while (p_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p_]))) ++p_;
        }
        std::string tok(s_.substr(b, p_ - b));
        *d = std::strtod(tok.c_str(), nullptr);
        *is_int = false;
        if (integral) {
            errno = 0;
            long long v = std::strtoll(tok.c_str(), nullptr, 10);
            if (errno == 0) *i = v, *is_int = true;
        }
        return true;
    }

    // Skips any value (unknown keys).
    bool skip(int depth = 0) {
        if (depth > 64) return fail("nesting too deep");
        ws();
        if (p_ >= s_.size()) return fail("unexpected end of line");
        char c = s_[p_];
        if (c == '"') { std::string t; return string(&t); }
        if (c == '{') {
            ++p_;
            if (eat('}')) return true;
            do {
                std::string k;
                if (!string(&k) || !expect(':') || !skip(depth + 1)) return false;
            } while (eat(','));
            return expect('}');
        }
        if (c == '[') {
            ++p_;
            if (eat(']')) return true;
            do {
                if (!skip(depth + 1)) return false;
            } while (eat(','));
            return expect(']');
        }
        for (const char *lit : {"true", "false", "null"}) {
            size_t n = std::strlen(lit);
            if (s_.substr(p_, n) == lit) return p_ += n, true;
        }
        double d; int64_t i; bool ii;
        return number(&d, &i, &ii);
    }

  private:
    std::string_view s_;
    size_t p_ = 0;
};

std::string trim_eol(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
}

bool blank(const std::string &s) {
    for (char c : s)
        if (c != ' ' && c != '\t' && c != '\r' && c != '\n') return false;
    return true;
}

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Arrival times past 1e12 ms (31.7 years from the trace's start) are taken
// for corrupt input (e.g. 1e300): virtual time would lose its resolution.
constexpr double kMaxArrivalMs = 1e12;

// A UTF-8 byte order mark at the start of a file is accepted and dropped.
constexpr std::string_view kBom = "\xEF\xBB\xBF";

// Shared by all formats: reads lines, hands each to parse(), applies the
// common checks (timestamps non-decreasing) and the skip_bad policy.
class LineReader : public Reader {
  public:
    LineReader(std::FILE *f, bool owns, bool skip_bad, std::string keep = {})
        : f_(f), owns_(owns), skip_bad_(skip_bad), keep_(std::move(keep)) {}
    // Streams the owned text (open_reader_text).
    bool open_own() {
        f_ = fmemopen(keep_.data(), keep_.size() ? keep_.size() : 1, "r");
        if (f_ && keep_.empty()) std::fgetc(f_);
        return f_ != nullptr;
    }
    ~LineReader() override {
        if (owns_ && f_) std::fclose(f_);
        std::free(buf_);
    }

    int next(Request *r) override {
        for (;;) {
            std::string s;
            if (have_pushback_) {
                s = std::move(pushback_), have_pushback_ = false;
            } else {
                int rc = read_line(&s);
                if (rc <= 0) return rc;
                if (blank(s) || skip_line(s)) continue;
            }
            std::string why;
            Request q;
            bool ok = parse(s, &q, &why);
            if (ok && !(q.arrival_ms <= kMaxArrivalMs)) {
                char b[160];
                std::snprintf(b, sizeof b, "timestamp %g ms is beyond %g ms (about 31.7 years): not a trace time", q.arrival_ms, kMaxArrivalMs);
                why = b, ok = false;
            }
            if (ok && q.arrival_ms < last_ms_) {
                char b[160];
                std::snprintf(b, sizeof b, "timestamp goes back (%.3f ms after %.3f ms)", q.arrival_ms, last_ms_);
                why = b, ok = false;
            }
            if (!ok) {
                if (skip_bad_) { ++skipped_; continue; }
                err_ = "line " + std::to_string(line_) + ": " + why;
                return -1;
            }
            last_ms_ = q.arrival_ms;
            q.id = n_++;
            q.line = line_;
            *r = std::move(q);
            return 1;
        }
    }

    // Reads the first line now (the native header sets block_tokens); a
    // line that is not consumed as a header is handed to next() later.
    void prime() {
        std::string s;
        if (read_line(&s) <= 0) return;
        if (!blank(s) && !skip_line(s)) pushback_ = std::move(s), have_pushback_ = true;
    }

  protected:
    int read_line(std::string *s) {
        errno = 0;
        ssize_t n = getline(&buf_, &cap_, f_);
        if (n < 0) {
            if (errno != 0 && !std::feof(f_)) return err_ = "read error: " + std::string(std::strerror(errno)), -1;
            return 0;
        }
        ++line_;
        *s = trim_eol(std::string(buf_, static_cast<size_t>(n)));
        if (line_ == 1 && s->compare(0, kBom.size(), kBom) == 0) s->erase(0, kBom.size());
        return 1;
    }
    virtual bool parse(const std::string &s, Request *r, std::string *why) = 0;
    virtual bool skip_line(const std::string &) { return false; }

    std::FILE *f_;
    bool owns_, skip_bad_;
    std::string keep_;  // backing text of an fmemopen stream
    char *buf_ = nullptr;
    size_t cap_ = 0;
    std::string pushback_;
    bool have_pushback_ = false;
    double last_ms_ = -1e300;
    uint64_t n_ = 0;
};

bool check_lengths(int64_t in, int64_t out, std::string *why) {
    if (in < 0 || out < 0) return *why = "negative length (input " + std::to_string(in) + ", output " + std::to_string(out) + ")", false;
    if (in > 100000000 || out > 100000000) return *why = "length out of range", false;
    if (in == 0) return *why = "input length is 0", false;
    return true;
}

class MooncakeReader : public LineReader {
  public:
    MooncakeReader(std::FILE *f, bool owns, bool skip_bad, std::string keep, bool fast)
        : LineReader(f, owns, skip_bad, std::move(keep)) {
        if (fast) fast_ = std::make_unique<MooncakeFast>();
    }

  protected:
    bool parse(const std::string &s, Request *r, std::string *why) override {
        if (fast_) {
            double ts = 0;
            int64_t in = 0, out = 0;
            // A line the fast path takes whole with a valid time; anything
            // else (errors included) is the hand-written parser's.
            if (fast_->parse(s, &ts, &in, &out, &r->hash_ids) && std::isfinite(ts) && ts >= 0) return finish(ts, in, out, r, why);
            r->hash_ids.clear();
        }
        Json j(s);
        bool have_ts = false, have_in = false, have_out = false, have_h = false;
        int64_t in = 0, out = 0;
        double ts = 0;
        if (!j.expect('{')) return *why = "bad JSON: " + j.err, false;
        if (!j.eat('}')) {
            do {
                std::string k;
                if (!j.string(&k) || !j.expect(':')) return *why = "bad JSON: " + j.err, false;
                bool *seen = k == "timestamp" ? &have_ts : k == "input_length" ? &have_in
                           : k == "output_length" ? &have_out : k == "hash_ids" ? &have_h : nullptr;
                if (seen && *seen) return *why = "duplicate key \"" + k + "\"", false;
                if (seen) *seen = true;
                if (k == "hash_ids") {
                    if (!j.expect('[')) return *why = "hash_ids is not an array", false;
                    if (!j.eat(']')) {
                        do {
                            double d; int64_t v; bool ii;
                            if (!j.number(&d, &v, &ii)) return *why = "bad JSON: " + j.err, false;
                            if (!ii || v < 0) return *why = "hash_ids holds a value that is not a non-negative integer", false;
                            r->hash_ids.push_back(static_cast<uint64_t>(v));
                        } while (j.eat(','));
                        if (!j.expect(']')) return *why = "bad JSON: " + j.err, false;
                    }
                } else if (seen) {
                    double d; int64_t v; bool ii;
                    if (!j.number(&d, &v, &ii)) return *why = "\"" + k + "\" is not a number", false;
                    if (k == "timestamp") {
                        if (!std::isfinite(d) || d < 0) return *why = "negative timestamp", false;
                        ts = d;
                    } else {
                        if (!ii) return *why = "\"" + k + "\" is not an integer", false;
                        (k == "input_length" ? in : out) = v;
                    }
                } else if (!j.skip()) {
                    return *why = "bad JSON: " + j.err, false;
                }
            } while (j.eat(','));
            if (!j.expect('}')) return *why = "bad JSON: " + j.err, false;
        }
        if (!j.at_end()) return *why = "bad JSON: trailing characters after the object", false;
        const char *missing = !have_ts ? "timestamp" : !have_in ? "input_length" : !have_out ? "output_length"
                            : !have_h ? "hash_ids" : nullptr;
        if (missing) return *why = std::string("missing key \"") + missing + "\"", false;
        return finish(ts, in, out, r, why);
    }

  private:
    std::unique_ptr<MooncakeFast> fast_;

    // The checks after the keys were read (both parsers).
    bool finish(double ts, int64_t in, int64_t out, Request *r, std::string *why) {
        if (!check_lengths(in, out, why)) return false;
        uint64_t need = ceil_div(static_cast<uint64_t>(in), block_tokens_);
        if (r->hash_ids.size() != need) {
            *why = "hash_ids has " + std::to_string(r->hash_ids.size()) + " ids, input_length " + std::to_string(in) +
                   " needs " + std::to_string(need) + " (one per " + std::to_string(block_tokens_) + " tokens)";
            return false;
        }
        r->arrival_ms = ts + 0.0;  // "-0" is 0 (the fast path reads it as the integer 0)
        r->input_len = static_cast<uint32_t>(in);
        r->output_len = static_cast<uint32_t>(out);
        return true;
    }
};

// Days since 1970-01-01 of a proleptic Gregorian date.
int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = static_cast<unsigned>(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

bool parse_uint(std::string_view s, int64_t *out) {
    if (s.empty() || s.size() > 18) return false;
    int64_t v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        v = v * 10 + (c - '0');
    }
    return *out = v, true;
}

bool parse_int(std::string_view s, int64_t *out) {
    bool neg = !s.empty() && s[0] == '-';
    if (!parse_uint(neg ? s.substr(1) : s, out)) return false;
    if (neg) *out = -*out;
    return true;
}

// "YYYY-MM-DD HH:MM:SS[.fffffff]" -> whole seconds since the epoch and the
// fraction (kept apart: a double of epoch milliseconds loses the 100 ns digits).
bool parse_wallclock(std::string_view s, int64_t *secs, double *frac_out) {
    int64_t y, mo, d, h, mi, se;
    if (s.size() < 19 || s[4] != '-' || s[7] != '-' || s[10] != ' ' || s[13] != ':' || s[16] != ':') return false;
    if (!parse_uint(s.substr(0, 4), &y) || !parse_uint(s.substr(5, 2), &mo) || !parse_uint(s.substr(8, 2), &d) ||
        !parse_uint(s.substr(11, 2), &h) || !parse_uint(s.substr(14, 2), &mi) || !parse_uint(s.substr(17, 2), &se))
        return false;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60) return false;
    double frac = 0;
    if (s.size() > 19) {
        if (s[19] != '.' || s.size() == 20 || s.size() > 29) return false;
        double scale = 0.1;
        for (char c : s.substr(20)) {
            if (c < '0' || c > '9') return false;
            frac += (c - '0') * scale;
            scale /= 10;
        }
    }
    *secs = days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 86400 + h * 3600 + mi * 60 + se;
    *frac_out = frac;
    return true;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
    std::vector<std::string_view> v;
    size_t b = 0;
    for (size_t i = 0; i <= s.size(); ++i)
        if (i == s.size() || s[i] == sep) v.push_back(s.substr(b, i - b)), b = i + 1;
    return v;
}

class AzureReader : public LineReader {
  public:
    using LineReader::LineReader;

  protected:
    // The header names the columns; TIMESTAMP, ContextTokens and
    // GeneratedTokens are found by name (any order, other columns ignored).
    // A first line without them is no header: the error says so.
    bool skip_line(const std::string &s) override {
        if (line_ != 1) return false;
        auto f = split(s, ',');
        cols_ = f.size();
        int found = 0;
        for (size_t i = 0; i < f.size(); ++i) {
            std::string_view c = f[i];
            while (!c.empty() && (c.front() == ' ' || c.front() == '"')) c.remove_prefix(1);
            while (!c.empty() && (c.back() == ' ' || c.back() == '"')) c.remove_suffix(1);
            for (int k = 0; k < 3; ++k)
                if (c == kCols[k]) {
                    if (idx_[k] != SIZE_MAX) return header_err_ = "CSV header names column " + std::string(c) + " twice", false;
                    idx_[k] = i, ++found;
                }
        }
        if (found == 3) return header_ = true, true;
        bool names = false;  // a header of other names, or data?
        for (auto c : f)
            for (char ch : c)
                if (std::isalpha(static_cast<unsigned char>(ch))) names = true;
        std::string missing;
        for (int k = 0; k < 3; ++k)
            if (idx_[k] == SIZE_MAX) missing += std::string(missing.empty() ? "" : ", ") + kCols[k];
        if (names && !(f.size() >= 1 && f[0].size() >= 19 && f[0][4] == '-')) {
            header_err_ = "CSV header \"" + s + "\" lacks column(s) " + missing +
                          " (an Azure LLM inference trace names TIMESTAMP, ContextTokens, GeneratedTokens)";
            return false;
        }
        header_err_ = "CSV without a header: the first line must name the columns TIMESTAMP, ContextTokens, GeneratedTokens";
        return false;
    }
    bool parse(const std::string &s, Request *r, std::string *why) override {
        if (!header_) return *why = header_err_.empty() ? "missing CSV header TIMESTAMP,ContextTokens,GeneratedTokens" : header_err_, false;
        auto f = split(s, ',');
        if (f.size() != cols_)
            return *why = "expected " + std::to_string(cols_) + " comma-separated fields (as the header), found " + std::to_string(f.size()), false;
        int64_t secs;
        double frac;
        std::string_view ts = f[idx_[0]], ci = f[idx_[1]], co = f[idx_[2]];
        if (!parse_wallclock(ts, &secs, &frac)) return *why = "bad TIMESTAMP \"" + std::string(ts) + "\"", false;
        int64_t in, out;
        if (!parse_int(ci, &in) || !parse_int(co, &out)) return *why = "token counts are not integers", false;
        if (!check_lengths(in, out, why)) return false;
        if (!have_t0_) t0_ = secs, f0_ = frac, have_t0_ = true;
        r->arrival_ms = static_cast<double>(secs - t0_) * 1000.0 + (frac - f0_) * 1000.0;
        r->input_len = static_cast<uint32_t>(in);
        r->output_len = static_cast<uint32_t>(out);
        return true;
    }
    static constexpr const char *kCols[3] = {"TIMESTAMP", "ContextTokens", "GeneratedTokens"};
    size_t idx_[3] = {SIZE_MAX, SIZE_MAX, SIZE_MAX}, cols_ = 3;
    std::string header_err_;
    bool header_ = false, have_t0_ = false;
    int64_t t0_ = 0;
    double f0_ = 0;
};

class NativeReader : public LineReader {
  public:
    using LineReader::LineReader;

  protected:
    bool skip_line(const std::string &s) override {
        if (line_ == 1) {
            header_ok_ = false;
            if (s.rfind("#speckv-trace v1", 0) != 0) return false;  // parse() reports it
            header_ok_ = true;
            auto p = s.find("block_tokens=");
            if (p != std::string::npos) {
                int64_t v;
                if (parse_uint(std::string_view(s).substr(p + 13, s.find_first_of(" \t", p) - p - 13), &v) && v > 0 &&
                    v <= (1 << 20))
                    block_tokens_ = static_cast<uint32_t>(v);
                else
                    header_ok_ = false;
            }
            return header_ok_;
        }
        return s[0] == '#';
    }
    bool parse(const std::string &s, Request *r, std::string *why) override {
        if (!header_ok_) return *why = "not a native trace: first line must be \"#speckv-trace v1 [block_tokens=N]\"", false;
        std::vector<std::string_view> f;
        size_t i = 0;
        while (i < s.size()) {
            while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
            size_t b = i;
            while (i < s.size() && s[i] != ' ' && s[i] != '\t') ++i;
            if (i > b) f.push_back(std::string_view(s).substr(b, i - b));
        }
        if (f.size() != 4) return *why = "expected 4 fields (arrival_ms input output hash_ids), found " + std::to_string(f.size()), false;
        std::string ts(f[0]);
        char *end = nullptr;
        double ms = std::strtod(ts.c_str(), &end);
        if (end == ts.c_str() || *end || !std::isfinite(ms)) return *why = "bad arrival time \"" + ts + "\"", false;
        if (ms < 0) return *why = "negative timestamp", false;
        int64_t in, out;
        if (!parse_int(f[1], &in) || !parse_int(f[2], &out)) return *why = "lengths are not integers", false;
        if (!check_lengths(in, out, why)) return false;
        if (f[3] != "-") {
            for (auto h : split(f[3], ',')) {
                int64_t v;
                if (!parse_uint(h, &v)) return *why = "bad hash id \"" + std::string(h) + "\"", false;
                r->hash_ids.push_back(static_cast<uint64_t>(v));
            }
            uint64_t need = ceil_div(static_cast<uint64_t>(in), block_tokens_);
            if (r->hash_ids.size() != need)
                return *why = "hash_ids has " + std::to_string(r->hash_ids.size()) + " ids, input " + std::to_string(in) +
                              " needs " + std::to_string(need),
                       false;
        }
        r->arrival_ms = ms;
        r->input_len = static_cast<uint32_t>(in);
        r->output_len = static_cast<uint32_t>(out);
        return true;
    }
    bool header_ok_ = false;
};

// Sniffs the format from the start of the stream and rewinds; a pipe (stdin)
// cannot rewind, so there only the first character decides ('{' Mooncake,
// 'T' Azure, anything else native).
Format sniff(std::FILE *f) {
    long pos = std::ftell(f);
    if (pos < 0) {
        int c = std::getc(f);
        if (c != EOF) std::ungetc(c, f);
        return c == '{' ? Format::Mooncake : c == 'T' ? Format::Azure : Format::Native;
    }
    char b[256] = {0};
    size_t n = std::fread(b, 1, sizeof b - 1, f);
    std::fseek(f, pos, SEEK_SET);
    std::string s(b, n);
    if (s.compare(0, kBom.size(), kBom) == 0) s.erase(0, kBom.size());
    size_t i = s.find_first_not_of(" \t\r\n");
    if (i == std::string::npos) return Format::Native;
    if (s[i] == '{') return Format::Mooncake;
    if (s[i] == '#') return Format::Native;
    // A first line with commas: CSV (Azure's columns, checked by name).
    size_t eol = s.find('\n', i);
    if (s.substr(i, eol == std::string::npos ? std::string::npos : eol - i).find(',') != std::string::npos) return Format::Azure;
    return Format::Native;
}

// The default parser (bench_trace_reader, docs/notes/2026-12-02-trace-replay-speed.md).
constexpr JsonParser kDefaultJson = JsonParser::Simdjson;

bool use_fast(JsonParser jp) {
    if (jp == JsonParser::Default) jp = kDefaultJson;
    return jp == JsonParser::Simdjson && MooncakeFast::available();
}

std::unique_ptr<Reader> make(std::FILE *f, bool owns, Format fmt, bool skip_bad, std::string keep, JsonParser jp) {
    if (fmt == Format::Auto && f) fmt = sniff(f);
    switch (fmt) {
    case Format::Mooncake:
        return std::make_unique<MooncakeReader>(f, owns, skip_bad, std::move(keep), use_fast(jp));
    case Format::Azure: return std::make_unique<AzureReader>(f, owns, skip_bad, std::move(keep));
    default: {
        auto r = std::make_unique<NativeReader>(f, owns, skip_bad, std::move(keep));
        if (f) r->prime();
        return r;
    }
    }
}

}  // namespace

bool simdjson_available() { return MooncakeFast::available(); }
const char *json_parser_name(JsonParser p) { return use_fast(p) ? "simdjson" : "hand"; }

std::unique_ptr<Reader> open_reader(const std::string &path, Format fmt, bool skip_bad, std::string *err, JsonParser jp) {
    if (path != "-") {
        struct stat sb;
        if (stat(path.c_str(), &sb) == 0 && S_ISDIR(sb.st_mode)) return *err = path + ": is a directory, not a trace file", nullptr;
    }
    std::FILE *f = path == "-" ? stdin : std::fopen(path.c_str(), "rb");
    if (!f) return *err = path + ": " + std::strerror(errno), nullptr;
    return make(f, path != "-", fmt, skip_bad, {}, jp);
}

std::unique_ptr<Reader> open_reader_text(std::string text, Format fmt, bool skip_bad, std::string *err, JsonParser jp) {
    // The reader owns the text and streams it (fmemopen over its own copy).
    std::FILE *probe = fmemopen(text.data(), text.size() ? text.size() : 1, "r");
    if (!probe) return *err = "fmemopen failed", nullptr;
    if (fmt == Format::Auto) fmt = sniff(probe);
    std::fclose(probe);
    auto r = make(nullptr, true, fmt, skip_bad, std::move(text), jp);
    auto *lr = static_cast<LineReader *>(r.get());
    if (!lr->open_own()) return *err = "fmemopen failed", nullptr;
    if (fmt == Format::Native) lr->prime();
    return r;
}

void write_header(std::FILE *f, Format fmt, uint32_t block_tokens) {
    if (fmt == Format::Native) std::fprintf(f, "#speckv-trace v1 block_tokens=%u\n", block_tokens);
    if (fmt == Format::Azure) std::fprintf(f, "TIMESTAMP,ContextTokens,GeneratedTokens\r\n");
}

void write_request(std::FILE *f, Format fmt, const Request &r) {
    if (fmt == Format::Mooncake) {
        std::fprintf(f, "{\"timestamp\": %" PRId64 ", \"input_length\": %u, \"output_length\": %u, \"hash_ids\": [",
                     static_cast<int64_t>(std::llround(r.arrival_ms)), r.input_len, r.output_len);
        for (size_t i = 0; i < r.hash_ids.size(); ++i)
            std::fprintf(f, "%s%" PRIu64, i ? ", " : "", r.hash_ids[i]);
        std::fprintf(f, "]}\n");
        return;
    }
    if (fmt == Format::Azure) {
        // Wall clock of an arbitrary day (the trace's own: 2023-11-16).
        double s = r.arrival_ms / 1000.0;
        int64_t whole = static_cast<int64_t>(s);
        int64_t frac = static_cast<int64_t>(std::llround((s - static_cast<double>(whole)) * 1e7));
        if (frac >= 10000000) whole += 1, frac -= 10000000;
        int64_t day = whole / 86400, sod = whole % 86400;
        std::fprintf(f, "2023-11-%02" PRId64 " %02" PRId64 ":%02" PRId64 ":%02" PRId64 ".%07" PRId64 ",%u,%u\r\n",
                     16 + day, sod / 3600, sod / 60 % 60, sod % 60, frac, r.input_len, r.output_len);
        return;
    }
    std::fprintf(f, "%.3f %u %u ", r.arrival_ms, r.input_len, r.output_len);
    if (r.hash_ids.empty()) std::fputc('-', f);
    for (size_t i = 0; i < r.hash_ids.size(); ++i)
        std::fprintf(f, "%s%" PRIu64, i ? "," : "", r.hash_ids[i]);
    std::fputc('\n', f);
}

}  // namespace speckv_trace
