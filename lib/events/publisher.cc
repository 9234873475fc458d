// SPDX-License-Identifier: Apache-2.0
// The publisher thread and its sockets (docs/events.md "Framing", "Replay").
// ZeroMQ's C API (libzmq); every socket is used by one thread at a time: made
// in start(), used by the thread, closed after the thread is joined.
#include "events/publisher.h"

#include <sys/eventfd.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <thread>
#include <utility>
#include <vector>

#include "config/config.h"
#include "util/status.h"

namespace speckv::events {

namespace {

void put_be64(uint64_t v, unsigned char out[8]) {
    for (int i = 7; i >= 0; i--, v >>= 8) out[i] = static_cast<unsigned char>(v);
}

bool binds(const std::string &ep) {
    return ep.find('*') != std::string::npos || ep.find("::") != std::string::npos || ep.rfind("ipc://", 0) == 0 ||
           ep.rfind("inproc://", 0) == 0;
}

}  // namespace

struct Publisher::Impl {
    Settings s;
    void *ctx = nullptr, *pub = nullptr, *router = nullptr;
    int wake = -1;  // eventfd: the queue became non-empty, or stop

    std::mutex mu;
    std::vector<Event> queue;  // under mu
    bool stop = false;         // under mu

    std::atomic<uint64_t> events{0}, batches{0}, dropped{0}, replays{0};
    std::deque<std::pair<uint64_t, std::string>> ring;  // (seq, payload): the thread's only
    uint64_t seq = 0;
    bool subscriber_seen = false;
    std::thread thread;

    ~Impl() {
        if (pub) zmq_close(pub);
        if (router) zmq_close(router);
        if (ctx) zmq_ctx_term(ctx);
        if (wake >= 0) close(wake);
    }

    void run();
    void send(std::vector<Event> &batch);
    void serve_replay();
    bool send_frames(void *sock, const std::string *frames, size_t n, const void *ident, size_t ident_len);
};

bool Publisher::Impl::send_frames(void *sock, const std::string *frames, size_t n, const void *ident,
                                  size_t ident_len) {
    if (ident && zmq_send(sock, ident, ident_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) return false;
    for (size_t i = 0; i < n; i++)
        if (zmq_send(sock, frames[i].data(), frames[i].size(), (i + 1 < n ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT) < 0)
            return false;
    return true;
}

void Publisher::Impl::send(std::vector<Event> &all) {
    for (size_t at = 0; at < all.size(); at += s.max_batch) {
        const size_t n = std::min<size_t>(s.max_batch, all.size() - at);
        try {
            std::string frames[3];
            frames[0] = s.topic;
            unsigned char be[8];
            put_be64(seq, be);
            frames[1].assign(reinterpret_cast<const char *>(be), 8);
            const double ts =
                std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
            encode_batch(ts, all.data() + at, n, s.encoding, &frames[2]);
            // A send that fails (never for want of a subscriber: PUB drops
            // those itself) loses the batch for live subscribers; it stays in
            // the replay buffer so the sequence has no hole.
            if (send_frames(pub, frames, 3, nullptr, 0)) events.fetch_add(n, std::memory_order_relaxed);
            else dropped.fetch_add(n, std::memory_order_relaxed);
            if (router && s.buffer_steps) {  // kept only where a replay socket can ask for it
                if (ring.size() >= s.buffer_steps) ring.pop_front();
                ring.emplace_back(seq, std::move(frames[2]));
            }
            seq++;
            batches.store(seq, std::memory_order_relaxed);
        } catch (...) {  // no memory: the batch is lost, counted
            dropped.fetch_add(n, std::memory_order_relaxed);
        }
    }
}

// vLLM's replay: [identity, "", start seq (8 bytes, big-endian)] in; out,
// every buffered batch from that seq as [identity, "", seq, payload], then
// the end marker [identity, "", -1 (8 bytes 0xff), ""].
void Publisher::Impl::serve_replay() {
    for (int budget = 64; budget > 0; budget--) {
        std::vector<std::string> parts;
        for (;;) {
            zmq_msg_t m;
            zmq_msg_init(&m);
            if (zmq_msg_recv(&m, router, ZMQ_DONTWAIT) < 0) {
                zmq_msg_close(&m);
                if (parts.empty()) return;  // nothing more waiting
                break;
            }
            try {
                parts.emplace_back(static_cast<const char *>(zmq_msg_data(&m)), zmq_msg_size(&m));
            } catch (...) {
            }
            const bool more = zmq_msg_more(&m);
            zmq_msg_close(&m);
            if (!more) break;
        }
        if (parts.size() != 3 || parts[2].size() > 8) continue;  // not a replay request (vLLM ignores it too)
        uint64_t start = 0;
        for (unsigned char c : parts[2]) start = (start << 8) | c;
        try {
            std::string frames[3];
            frames[0] = "";
            unsigned char be[8];
            for (const auto &[sq, payload] : ring) {
                if (sq < start) continue;
                put_be64(sq, be);
                frames[1].assign(reinterpret_cast<const char *>(be), 8);
                frames[2] = payload;
                if (!send_frames(router, frames, 3, parts[0].data(), parts[0].size())) break;
            }
            frames[1].assign(8, '\xff');
            frames[2].clear();
            send_frames(router, frames, 3, parts[0].data(), parts[0].size());
            replays.fetch_add(1, std::memory_order_relaxed);
        } catch (...) {
        }
    }
}

void Publisher::Impl::run() {
    std::vector<Event> batch;
    for (;;) {
        zmq_pollitem_t items[2] = {{nullptr, wake, ZMQ_POLLIN, 0}, {router, 0, ZMQ_POLLIN, 0}};
        if (zmq_poll(items, router ? 2 : 1, 100) < 0 && zmq_errno() == ETERM) return;
        if (items[0].revents & ZMQ_POLLIN) {
            uint64_t v;
            if (read(wake, &v, sizeof v) < 0) { /* EAGAIN: woken already */
            }
            // Batching: the events of the next batch_us join this one, and
            // their pushes find the queue non-empty, so they write no eventfd:
            // at most one wake-up per batch for the pool's paths.
            bool stopping;
            {
                std::lock_guard<std::mutex> g(mu);
                stopping = stop;
            }
            if (!stopping && s.batch_us) std::this_thread::sleep_for(std::chrono::microseconds(s.batch_us));
        }
        if (router && (items[1].revents & ZMQ_POLLIN)) serve_replay();
        bool stopping;
        {
            std::lock_guard<std::mutex> g(mu);
            batch.swap(queue);
            stopping = stop;
        }
        if (!batch.empty()) send(batch);
        batch.clear();
        if (stopping) return;
    }
}

Publisher::Publisher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

bool Publisher::subscriber_seen() const noexcept { return impl_ && impl_->subscriber_seen; }

Publisher::~Publisher() {
    if (!impl_) return;
    if (getpid() != pid_) {  // a fork() child: the thread and sockets are the parent's
        (void)impl_.release();
        return;
    }
    {
        std::lock_guard<std::mutex> g(impl_->mu);
        impl_->stop = true;
    }
    const uint64_t one = 1;
    if (write(impl_->wake, &one, sizeof one) < 0) { /* the thread polls every 100 ms anyway */
    }
    if (impl_->thread.joinable()) impl_->thread.join();
    // What the last batches left in ZeroMQ's queues may take this long to go.
    const int linger = 1000;
    zmq_setsockopt(impl_->pub, ZMQ_LINGER, &linger, sizeof linger);
    if (impl_->router) zmq_setsockopt(impl_->router, ZMQ_LINGER, &linger, sizeof linger);
}

int Publisher::settings_from(const Config &cfg, Settings *s, bool *on) {
    s->endpoint = cfg.get_str("events.endpoint");
    *on = !s->endpoint.empty();
    s->replay_endpoint = cfg.get_str("events.replay_endpoint");
    s->topic = cfg.get_str("events.topic");
    s->buffer_steps = static_cast<uint64_t>(cfg.get("events.buffer_steps"));
    s->queue = static_cast<uint64_t>(cfg.get("events.queue"));
    s->hwm = static_cast<int>(cfg.get("events.hwm"));
    s->encoding = cfg.get("events.encoding") == 1 ? Encoding::kArray : Encoding::kMap;
    s->batch_us = static_cast<uint32_t>(cfg.get("events.batch_us"));
    if (!*on && !s->replay_endpoint.empty())
        return fail(SPECKV_EINVAL, "config events.replay_endpoint is set but events.endpoint is not");
    return SPECKV_OK;
}

int Publisher::start(const Settings &s, std::unique_ptr<Publisher> *out) {
    std::unique_ptr<Impl> im;
    try {
        im = std::make_unique<Impl>();
        im->s = s;
        if (im->s.max_batch == 0) im->s.max_batch = 1;
        im->queue.reserve(1024);
    } catch (...) {
        return fail(SPECKV_ENOMEM, "KV events: out of memory");
    }
    im->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (im->wake < 0) return fail(SPECKV_EIO, "KV events: eventfd: %s", std::strerror(errno));
    im->ctx = zmq_ctx_new();
    if (!im->ctx) return fail(SPECKV_EIO, "KV events: zmq_ctx_new: %s", zmq_strerror(zmq_errno()));
    im->pub = zmq_socket(im->ctx, s.wait_subscriber_ms ? ZMQ_XPUB : ZMQ_PUB);
    if (!im->pub) return fail(SPECKV_EIO, "KV events: zmq_socket: %s", zmq_strerror(zmq_errno()));
    zmq_setsockopt(im->pub, ZMQ_SNDHWM, &im->s.hwm, sizeof im->s.hwm);
    const bool bind = binds(s.endpoint);
    if ((bind ? zmq_bind(im->pub, s.endpoint.c_str()) : zmq_connect(im->pub, s.endpoint.c_str())) != 0)
        return fail(SPECKV_EINVAL, "config events.endpoint '%s': cannot %s: %s", s.endpoint.c_str(),
                    bind ? "bind" : "connect", zmq_strerror(zmq_errno()));
    if (!s.replay_endpoint.empty()) {
        im->router = zmq_socket(im->ctx, ZMQ_ROUTER);
        if (!im->router) return fail(SPECKV_EIO, "KV events: zmq_socket: %s", zmq_strerror(zmq_errno()));
        if (zmq_bind(im->router, s.replay_endpoint.c_str()) != 0)
            return fail(SPECKV_EINVAL, "config events.replay_endpoint '%s': cannot bind: %s",
                        s.replay_endpoint.c_str(), zmq_strerror(zmq_errno()));
    }
    if (s.wait_subscriber_ms) {  // XPUB: a subscription is a message to read
        zmq_pollitem_t it = {im->pub, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, static_cast<long>(s.wait_subscriber_ms)) > 0 && (it.revents & ZMQ_POLLIN)) {
            char msg[256];
            im->subscriber_seen = zmq_recv(im->pub, msg, sizeof msg, ZMQ_DONTWAIT) >= 1 && msg[0] == 1;
        }
    }
    const int zero = 0;  // a failed start closes at once
    zmq_setsockopt(im->pub, ZMQ_LINGER, &zero, sizeof zero);
    if (im->router) zmq_setsockopt(im->router, ZMQ_LINGER, &zero, sizeof zero);
    std::unique_ptr<Publisher> p(new (std::nothrow) Publisher(nullptr));
    if (!p) return fail(SPECKV_ENOMEM, "KV events: out of memory");
    Impl *raw = im.get();
    try {
        im->thread = std::thread([raw] { raw->run(); });
    } catch (...) {
        return fail(SPECKV_EIO, "KV events: cannot start the publisher thread");
    }
    p->impl_ = std::move(im);
    p->pid_ = getpid();
    *out = std::move(p);
    return SPECKV_OK;
}

void Publisher::push(const Event *e, size_t n) noexcept {
    bool was_empty;
    {
        std::lock_guard<std::mutex> g(impl_->mu);
        if (impl_->queue.size() + n > impl_->s.queue) {
            impl_->dropped.fetch_add(n, std::memory_order_relaxed);
            return;
        }
        was_empty = impl_->queue.empty();
        try {
            impl_->queue.insert(impl_->queue.end(), e, e + n);
        } catch (...) {
            impl_->dropped.fetch_add(n, std::memory_order_relaxed);
            return;
        }
    }
    if (was_empty) {
        const uint64_t one = 1;
        if (write(impl_->wake, &one, sizeof one) < 0) { /* full counter: the thread is awake anyway */
        }
    }
}

namespace {

Event block_event(Kind k, uint64_t tenant, const uint8_t hash[32], uint64_t block_size, Medium m) {
    Event e;
    e.kind = k;
    e.medium = m;
    e.tenant = tenant;
    e.block_size = k == Kind::kStored ? block_size : 0;
    std::memcpy(e.hash, hash, 32);
    return e;
}

}  // namespace

void Publisher::stored(uint64_t tenant, const uint8_t hash[32], uint64_t block_size, Medium m) noexcept {
    const Event e = block_event(Kind::kStored, tenant, hash, block_size, m);
    push(&e, 1);
}

void Publisher::removed(uint64_t tenant, const uint8_t hash[32], Medium m) noexcept {
    const Event e = block_event(Kind::kRemoved, tenant, hash, 0, m);
    push(&e, 1);
}

// One push: the two events go in the same batch, so no subscriber ever sees
// the block on neither medium between two batches.
void Publisher::moved(uint64_t tenant, const uint8_t hash[32], uint64_t block_size, Medium from, Medium to) noexcept {
    const Event e[2] = {block_event(Kind::kRemoved, tenant, hash, 0, from),
                        block_event(Kind::kStored, tenant, hash, block_size, to)};
    push(e, 2);
}

int Publisher::open(const Config &cfg, std::unique_ptr<Publisher> *out) {
    Settings s;
    bool on = false;
    if (int rc = settings_from(cfg, &s, &on); rc != SPECKV_OK || !on) return rc;
    return start(s, out);
}

void Publisher::cleared() noexcept {
    Event e;
    e.kind = Kind::kCleared;
    push(&e, 1);
}

Counters Publisher::counters() const noexcept {
    Counters c;
    c.events = impl_->events.load(std::memory_order_relaxed);
    c.batches = impl_->batches.load(std::memory_order_relaxed);
    c.dropped = impl_->dropped.load(std::memory_order_relaxed);
    c.replays = impl_->replays.load(std::memory_order_relaxed);
    return c;
}

}  // namespace speckv::events
