// SPDX-License-Identifier: Apache-2.0
#include "remote/cluster.h"

#include <hiredis/hiredis.h>
#include <limits.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstdio>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <thread>

namespace speckv::remote {

uint16_t crc16(const void *data, size_t n) {
    const auto *p = static_cast<const uint8_t *>(data);
    uint16_t crc = 0;
    for (size_t i = 0; i < n; i++) {
        crc ^= static_cast<uint16_t>(p[i]) << 8;
        for (int b = 0; b < 8; b++) crc = (crc & 0x8000) ? static_cast<uint16_t>((crc << 1) ^ 0x1021) : crc << 1;
    }
    return crc;
}

uint16_t key_slot(std::string_view key) {
    size_t open = key.find('{');
    if (open != std::string_view::npos) {
        size_t close = key.find('}', open + 1);
        if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
    }
    return crc16(key.data(), key.size()) & (kSlots - 1);
}

namespace {
bool parse_port(std::string_view s, int *port) {
    int v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size() || v < 1 || v > 65535) return false;
    *port = v;
    return true;
}

// "host:port" (the host may be empty: the node we asked).
bool split_hostport(std::string_view s, std::string *host, int *port) {
    size_t colon = s.rfind(':');
    if (colon == std::string_view::npos) return false;
    *host = std::string(s.substr(0, colon));
    return parse_port(s.substr(colon + 1), port);
}

timeval tv_of(int ms) { return timeval{ms / 1000, (ms % 1000) * 1000}; }

// Writes the commands of `idx` (with ASKING before those that need it) in
// RESP straight from the callers' strings with writev: a block's bytes are
// not copied into hiredis's output buffer (twice, for its formatting), and no
// buffer of a block's size is allocated and freed per command.
bool send_all(redisContext *c, const std::vector<Command> &cmds, const std::vector<size_t> &idx,
              const std::vector<char> &asking) {
    static const char kAsking[] = "*1\r\n$6\r\nASKING\r\n";
    std::string small;  // headers and small arguments
    struct Seg {
        const char *ext;  // nullptr: `len` bytes of `small` at `off`
        size_t off, len;
    };
    std::vector<Seg> segs;
    auto add_small = [&](const char *p, size_t n) {
        if (!segs.empty() && !segs.back().ext && segs.back().off + segs.back().len == small.size())
            segs.back().len += n;
        else
            segs.push_back(Seg{nullptr, small.size(), n});
        small.append(p, n);
    };
    char num[32];
    for (size_t i : idx) {
        if (asking[i]) add_small(kAsking, sizeof kAsking - 1);
        int k = std::snprintf(num, sizeof num, "*%zu\r\n", cmds[i].args.size());
        add_small(num, static_cast<size_t>(k));
        for (const auto &a : cmds[i].args) {
            k = std::snprintf(num, sizeof num, "$%zu\r\n", a.size());
            add_small(num, static_cast<size_t>(k));
            if (a.size() <= 4096) {
                add_small(a.data(), a.size());
            } else {
                segs.push_back(Seg{a.data(), 0, a.size()});
            }
            add_small("\r\n", 2);
        }
    }
    std::vector<iovec> iov;
    iov.reserve(segs.size());
    for (const auto &g : segs)
        iov.push_back(iovec{const_cast<char *>(g.ext ? g.ext : small.data() + g.off), g.len});
    size_t at = 0;
    while (at < iov.size()) {
        int n = static_cast<int>(std::min<size_t>(iov.size() - at, IOV_MAX));
        ssize_t w = ::writev(c->fd, iov.data() + at, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return false;  // EAGAIN: SO_SNDTIMEO ran out; anything else: the connection is gone
        }
        size_t left = static_cast<size_t>(w);
        while (at < iov.size() && left >= iov[at].iov_len) left -= iov[at++].iov_len;
        if (left) {
            iov[at].iov_base = static_cast<char *>(iov[at].iov_base) + left;
            iov[at].iov_len -= left;
        }
    }
    return true;
}
}  // namespace

bool parse_uri(std::string_view uri, std::vector<Endpoint> *out, std::string *err) {
    constexpr std::string_view kScheme = "redis://";
    out->clear();
    if (uri.substr(0, kScheme.size()) != kScheme) {
        *err = "remote.uri must start with redis://";
        return false;
    }
    std::string_view rest = uri.substr(kScheme.size());
    while (!rest.empty()) {
        size_t comma = rest.find(',');
        std::string_view item = rest.substr(0, comma);
        Endpoint ep;
        if (!split_hostport(item, &ep.host, &ep.port) || ep.host.empty()) {
            *err = "remote.uri: '" + std::string(item) + "' is not host:port (port 1..65535)";
            return false;
        }
        out->push_back(std::move(ep));
        if (comma == std::string_view::npos) break;
        rest = rest.substr(comma + 1);
        if (rest.empty()) {
            *err = "remote.uri ends with a comma";
            return false;
        }
    }
    if (out->empty()) {
        *err = "remote.uri names no host:port";
        return false;
    }
    return true;
}

bool parse_redirect(std::string_view e, Redirect *out) {
    const bool moved = e.substr(0, 6) == "MOVED ", ask = e.substr(0, 4) == "ASK ";
    if (!moved && !ask) return false;
    std::string_view rest = e.substr(moved ? 6 : 4);
    const size_t sp = rest.find(' ');
    if (sp == std::string_view::npos) return false;
    int slot = -1;
    auto [p, ec] = std::from_chars(rest.data(), rest.data() + sp, slot);
    if (ec != std::errc() || p != rest.data() + sp || slot < 0 || slot >= kSlots) return false;
    Redirect r;
    if (!split_hostport(rest.substr(sp + 1), &r.host, &r.port)) return false;
    r.slot = slot;
    r.ask = ask;
    *out = std::move(r);
    return true;
}

bool parse_slots(const redisReply *r, std::vector<SlotRange> *out) {
    out->clear();
    if (!r || r->type != REDIS_REPLY_ARRAY) return false;
    for (size_t e = 0; e < r->elements; e++) {
        const redisReply *range = r->element[e];
        if (!range || range->type != REDIS_REPLY_ARRAY || range->elements < 3) return false;
        const redisReply *lo = range->element[0], *hi = range->element[1], *master = range->element[2];
        if (!lo || !hi || !master || lo->type != REDIS_REPLY_INTEGER || hi->type != REDIS_REPLY_INTEGER ||
            master->type != REDIS_REPLY_ARRAY || master->elements < 2)
            return false;
        const redisReply *host = master->element[0], *port = master->element[1];
        if (!host || !port || host->type != REDIS_REPLY_STRING || port->type != REDIS_REPLY_INTEGER) return false;
        if (lo->integer < 0 || hi->integer >= kSlots || lo->integer > hi->integer || port->integer < 1 ||
            port->integer > 65535)
            return false;
        SlotRange sr;
        sr.lo = static_cast<int>(lo->integer);
        sr.hi = static_cast<int>(hi->integer);
        sr.host.assign(host->str ? host->str : "", host->str ? host->len : 0);
        if (sr.host == "?") sr.host.clear();
        sr.port = static_cast<int>(port->integer);
        out->push_back(std::move(sr));
    }
    return true;
}

Cluster::Cluster(std::vector<Endpoint> seeds, int timeout_ms) : seeds_(std::move(seeds)), timeout_ms_(timeout_ms) {
    slots_.fill(-1);
    for (const auto &s : seeds_) node_of(s.host, s.port);
}

Cluster::~Cluster() {
    for (auto &n : nodes_)
        if (n.ctx) redisFree(n.ctx);
}

int Cluster::node_of(const std::string &host, int port) {
    for (size_t i = 0; i < nodes_.size(); i++)
        if (nodes_[i].ep.port == port && nodes_[i].ep.host == host) return static_cast<int>(i);
    nodes_.push_back(Node{Endpoint{host, port}});
    return static_cast<int>(nodes_.size() - 1);
}

void Cluster::drop(int node) {
    Node &n = nodes_[node];
    if (n.ctx) redisFree(n.ctx);
    n.ctx = nullptr;
    // Back off: a dead node costs one failed connect per interval, not one per command.
    n.retry_after = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::min(timeout_ms_, 500));
}

redisContext *Cluster::conn(int node) {
    Node &n = nodes_[node];
    if (n.ctx) return n.ctx;
    if (std::chrono::steady_clock::now() < n.retry_after) return nullptr;
    redisContext *c = redisConnectWithTimeout(n.ep.host.c_str(), n.ep.port, tv_of(timeout_ms_));
    if (!c || c->err || redisSetTimeout(c, tv_of(timeout_ms_)) != REDIS_OK) {
        if (c) redisFree(c);
        drop(node);
        return nullptr;
    }
    // Keep the reply buffer between replies (hiredis frees it past 16 KiB
    // otherwise): blocks are large, and a buffer per reply churns the heap.
    c->reader->maxbuf = 0;
    if (n.connected_once) counters_.reconnects++;
    n.connected_once = true;
    n.ctx = c;
    return c;
}

bool Cluster::refresh_slots() {
    counters_.refreshes++;
    // Ask the nodes we know (the map's, then the seeds) until one answers.
    size_t known = nodes_.size();
    for (size_t i = 0; i < known; i++) {
        redisContext *c = conn(static_cast<int>(i));
        if (!c) continue;
        auto *r = static_cast<redisReply *>(redisCommand(c, "CLUSTER SLOTS"));
        if (!r) {
            drop(static_cast<int>(i));
            continue;
        }
        std::vector<SlotRange> ranges;
        const bool ok = parse_slots(r, &ranges);
        if (ok) {
            std::array<int16_t, kSlots> map;
            map.fill(-1);
            const std::string asked = nodes_[i].ep.host;
            for (const SlotRange &sr : ranges) {
                int idx = node_of(sr.host.empty() ? asked : sr.host, sr.port);
                for (int s = sr.lo; s <= sr.hi; s++) map[s] = static_cast<int16_t>(idx);
            }
            slots_ = map;
            have_map_ = true;
        }
        freeReplyObject(r);
        if (ok) return true;
    }
    return false;
}

int Cluster::route(const std::string &key) {
    int n = slots_[key_slot(key)];
    if (n >= 0) return n;
    // No owner known: any reachable node answers with MOVED.
    for (size_t i = 0; i < nodes_.size(); i++)
        if (nodes_[i].ctx) return static_cast<int>(i);
    return nodes_.empty() ? -1 : 0;
}

std::vector<Reply> Cluster::exec(const std::vector<Command> &cmds) {
    std::vector<Reply> out(cmds.size());
    if (cmds.empty()) return out;
    if (!have_map_) refresh_slots();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms_);
    std::vector<int> target(cmds.size());
    std::vector<char> asking(cmds.size(), 0);
    std::vector<size_t> pending(cmds.size());
    for (size_t i = 0; i < cmds.size(); i++) {
        pending[i] = i;
        target[i] = route(cmds[i].key);
    }
    constexpr int kAttempts = 5;
    for (int attempt = 0; attempt < kAttempts && !pending.empty(); attempt++) {
        std::vector<size_t> retry;
        bool need_refresh = false, need_pause = false;
        // Group by node, keeping the callers' order within a node.
        std::vector<int> order_nodes;
        for (size_t i : pending)
            if (std::find(order_nodes.begin(), order_nodes.end(), target[i]) == order_nodes.end())
                order_nodes.push_back(target[i]);
        for (int node : order_nodes) {
            std::vector<size_t> mine;
            for (size_t i : pending)
                if (target[i] == node) mine.push_back(i);
            redisContext *c = node >= 0 ? conn(node) : nullptr;
            auto give_up_io = [&](size_t from, const char *why) {
                for (size_t k = from; k < mine.size(); k++) {
                    out[mine[k]] = Reply{Reply::kIo, why};
                    retry.push_back(mine[k]);
                }
                need_refresh = true;
            };
            if (!c) {
                give_up_io(0, "cannot connect");
                continue;
            }
            bool broken = !send_all(c, cmds, mine, asking);
            if (broken) {
                drop(node);
                give_up_io(0, "connection lost or timed out sending");
                continue;
            }
            for (size_t k = 0; k < mine.size(); k++) {
                size_t i = mine[k];
                void *rv = nullptr;
                if (asking[i]) {  // ASKING's own +OK
                    if (redisGetReply(c, &rv) != REDIS_OK) {
                        broken = true;
                    } else {
                        freeReplyObject(rv);
                        rv = nullptr;
                    }
                    asking[i] = 0;
                }
                if (broken || redisGetReply(c, &rv) != REDIS_OK || !rv) {
                    // The reason first: drop() frees the context.
                    const bool timed_out = c->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
                    drop(node);
                    give_up_io(k, timed_out ? "timed out" : "connection lost");
                    break;
                }
                auto *r = static_cast<redisReply *>(rv);
                Reply &o = out[i];
                switch (r->type) {
                    case REDIS_REPLY_STRING:
                        if (cmds[i].view) {
                            o = Reply{Reply::kValue, {}};
                            o.view = std::string_view(r->str, r->len);
                            o.held = std::shared_ptr<void>(r, freeReplyObject);
                            r = nullptr;  // freed with o.held
                        } else {
                            o = Reply{Reply::kValue, std::string(r->str, r->len)};
                        }
                        break;
                    case REDIS_REPLY_NIL: o = Reply{Reply::kNil, {}}; break;
                    case REDIS_REPLY_STATUS: o = Reply{Reply::kOk, std::string(r->str, r->len)}; break;
                    case REDIS_REPLY_INTEGER: o = Reply{Reply::kOk, std::to_string(r->integer)}; break;
                    case REDIS_REPLY_ERROR: {
                        std::string_view e(r->str, r->len);
                        Redirect rd;
                        if (parse_redirect(e, &rd)) {
                            std::string host = rd.host.empty() ? nodes_[node].ep.host : rd.host;
                            int to = node_of(host, rd.port);
                            counters_.redirects++;
                            target[i] = to;
                            if (!rd.ask) slots_[rd.slot] = static_cast<int16_t>(to);
                            if (rd.ask) asking[i] = 1;
                            retry.push_back(i);
                            o = Reply{Reply::kError, std::string(e)};
                        } else if (e.substr(0, 8) == "TRYAGAIN" || e.substr(0, 11) == "CLUSTERDOWN") {
                            o = Reply{Reply::kIo, std::string(e)};
                            need_pause = true;
                            need_refresh = need_refresh || e.substr(0, 11) == "CLUSTERDOWN";
                            retry.push_back(i);
                        } else {
                            o = Reply{Reply::kError, std::string(e)};
                        }
                        break;
                    }
                    default: o = Reply{Reply::kOk, {}}; break;
                }
                if (r) freeReplyObject(r);
            }
        }
        if (retry.empty() || std::chrono::steady_clock::now() >= deadline) break;
        if (need_refresh) {
            refresh_slots();
            for (size_t i : retry)
                if (!asking[i]) target[i] = route(cmds[i].key);
        }
        if (need_pause) std::this_thread::sleep_for(std::chrono::milliseconds(std::min(20, timeout_ms_)));
        pending = std::move(retry);
    }
    for (const auto &o : out)
        if (o.kind == Reply::kIo) counters_.io_errors++;
    return out;
}

Reply Cluster::exec_on(const Endpoint &ep, const std::vector<std::string> &args) {
    int node = node_of(ep.host, ep.port);
    redisContext *c = conn(node);
    if (!c) return Reply{Reply::kIo, "cannot connect"};
    std::vector<const char *> argv;
    std::vector<size_t> lens;
    for (const auto &a : args) {
        argv.push_back(a.data());
        lens.push_back(a.size());
    }
    auto *r = static_cast<redisReply *>(redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
    if (!r) {
        drop(node);
        return Reply{Reply::kIo, "connection lost"};
    }
    Reply o;
    switch (r->type) {
        case REDIS_REPLY_STRING: o = Reply{Reply::kValue, std::string(r->str, r->len)}; break;
        case REDIS_REPLY_NIL: o = Reply{Reply::kNil, {}}; break;
        case REDIS_REPLY_ERROR: o = Reply{Reply::kError, std::string(r->str, r->len)}; break;
        case REDIS_REPLY_INTEGER: o = Reply{Reply::kOk, std::to_string(r->integer)}; break;
        default: o = Reply{Reply::kOk, r->str ? std::string(r->str, r->len) : std::string()}; break;
    }
    freeReplyObject(r);
    return o;
}

}  // namespace speckv::remote
