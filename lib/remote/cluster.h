// SPDX-License-Identifier: Apache-2.0
// A small Redis Cluster client on libhiredis's blocking contexts: CRC16 key
// slots, the slot map from CLUSTER SLOTS, MOVED and ASK redirects, reconnects
// with a back-off, socket timeouts, and batches pipelined per node.
// Not thread-safe: one user at a time (the remote tier keeps one per role).
#pragma once
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct redisContext;
struct redisReply;

namespace speckv::remote {

// CRC16/XMODEM (poly 0x1021, init 0), as Redis Cluster hashes keys.
uint16_t crc16(const void *data, size_t n);
// The cluster slot of a key: CRC16 of its hash tag (the bytes between the
// first '{' and the next '}', when not empty) or of the whole key, mod 16384.
uint16_t key_slot(std::string_view key);
constexpr int kSlots = 16384;

struct Endpoint {
    std::string host;
    int port = 0;
};

// "redis://host:port[,host:port...]" -> endpoints. Returns false with *err set
// on anything else (no scheme, empty host, port outside 1..65535).
bool parse_uri(std::string_view uri, std::vector<Endpoint> *out, std::string *err);

// A MOVED or ASK error: "MOVED <slot> <host>:<port>" (the host may be empty:
// the node that answered). False for any other text, a slot outside
// 0..16383 or a port outside 1..65535.
struct Redirect {
    bool ask = false;
    int slot = -1;
    std::string host;
    int port = 0;
};
bool parse_redirect(std::string_view error_text, Redirect *out);

// A CLUSTER SLOTS reply: [[lo, hi, [host, port, ...], replicas...], ...].
// False (and nothing to use) when any range is malformed, out of 0..16383,
// or names a port outside 1..65535. An empty or "?" host is left empty: the
// node that answered.
struct SlotRange {
    int lo = 0, hi = 0;
    std::string host;
    int port = 0;
};
bool parse_slots(const redisReply *reply, std::vector<SlotRange> *out);

struct Reply {
    enum Kind {
        kOk,     // a status or integer reply
        kValue,  // a bulk string: `data` (or, for a Command with `view`, bytes())
        kNil,    // no such key
        kError,  // the server said no: `data` is its error text
        kIo,     // no answer: the node is unreachable, timed out or the cluster is down
    } kind = kIo;
    std::string data;
    // A `view` command's bulk string stays in hiredis' reply, held here, and
    // is not copied into `data` (a block is megabytes: one copy less, and
    // one fresh allocation less to fault in).
    std::shared_ptr<void> held;
    std::string_view view;
    std::string_view bytes() const { return held ? view : std::string_view(data); }
};

struct Command {
    std::vector<std::string> args;  // argv, e.g. {"GET", key}
    std::string key;                // routes the command (its slot)
    bool view = false;              // a bulk string reply is left in place: Reply::bytes()
};

struct ClusterCounters {
    uint64_t redirects = 0;   // MOVED and ASK replies followed
    uint64_t reconnects = 0;  // connections (re)opened after the first
    uint64_t io_errors = 0;   // commands that got no answer
    uint64_t refreshes = 0;   // slot map reloads
};

class Cluster {
  public:
    Cluster(std::vector<Endpoint> seeds, int timeout_ms);
    ~Cluster();
    Cluster(const Cluster &) = delete;
    Cluster &operator=(const Cluster &) = delete;

    // Runs every command, pipelined: one round trip per node per attempt.
    // Follows MOVED (and updates the slot map) and ASK (with ASKING), retries
    // TRYAGAIN / CLUSTERDOWN and a lost connection a few times within the
    // timeout, then gives each command its final reply.
    std::vector<Reply> exec(const std::vector<Command> &cmds);
    // One command on the node at `ep` (tests and tools: CLUSTER KEYSLOT, ...).
    Reply exec_on(const Endpoint &ep, const std::vector<std::string> &args);
    const ClusterCounters &counters() const { return counters_; }

  private:
    struct Node {
        Endpoint ep;
        redisContext *ctx = nullptr;
        bool connected_once = false;
        std::chrono::steady_clock::time_point retry_after{};
    };
    int node_of(const std::string &host, int port);
    redisContext *conn(int node);
    void drop(int node);
    bool refresh_slots();
    int route(const std::string &key);

    std::vector<Endpoint> seeds_;
    std::vector<Node> nodes_;
    std::array<int16_t, kSlots> slots_;
    bool have_map_ = false;
    int timeout_ms_;
    ClusterCounters counters_;
};

}  // namespace speckv::remote
