// SPDX-License-Identifier: Apache-2.0
// KV events for routers (docs/events.md): the pool's changes, as vLLM's
// KVEventBatch on a ZeroMQ PUB socket, with vLLM's replay socket. The pool
// calls stored()/removed() under its lock: they only append to a bounded
// queue (full: the event is dropped and counted) and never touch ZeroMQ; a
// background thread batches, encodes, sends, keeps the replay buffer and
// answers replay requests.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "events/encode.h"

namespace speckv {
class Config;
}

namespace speckv::events {

struct Settings {
    std::string endpoint;         // PUB: bound if it has '*', "::", or is ipc:// / inproc://, else connected
    std::string replay_endpoint;  // ROUTER (bound); empty = no replay
    std::string topic;
    uint64_t buffer_steps = 10000;  // batches kept for replay
    uint64_t queue = 100000;        // events waiting for the thread; beyond, dropped
    int hwm = 100000;
    uint32_t max_batch = 1024;      // events per KVEventBatch at most
    uint32_t batch_us = 1000;       // woken by a first event, the thread waits this long for more
    Encoding encoding = Encoding::kMap;
    // > 0: an XPUB socket, and start() waits up to this long for a first
    // subscription, so that a short-lived publisher (`speckv pool reset`)
    // does not send before anyone listens. 0: PUB, no wait (the pool's).
    uint32_t wait_subscriber_ms = 0;
};

struct Counters {
    uint64_t events = 0;     // events sent in batches
    uint64_t batches = 0;    // batches sent (the next sequence number)
    uint64_t dropped = 0;    // events lost: queue full, encode or send failure
    uint64_t replays = 0;    // replay requests answered
};

class Publisher {
  public:
    // SPECKV_OK and *out, or an error with the message set (sockets that
    // cannot bind/connect, no memory). `s.endpoint` must not be empty.
    static int start(const Settings &s, std::unique_ptr<Publisher> *out);
    // Settings from the config keys events.*; *on = false when events.endpoint is unset.
    static int settings_from(const Config &cfg, Settings *s, bool *on);
    // start() with the settings of `cfg`; *out stays null when events are off.
    static int open(const Config &cfg, std::unique_ptr<Publisher> *out);
    ~Publisher();  // sends what is queued (bounded wait), then closes the sockets

    void stored(uint64_t tenant, const uint8_t hash[32], uint64_t block_size, Medium m) noexcept;
    void removed(uint64_t tenant, const uint8_t hash[32], Medium m) noexcept;
    void cleared() noexcept;
    // A block went from one medium to another (demoted to L4, promoted back):
    // BlockRemoved on `from`, then BlockStored on `to`, as vLLM's offload tiers report.
    void moved(uint64_t tenant, const uint8_t hash[32], uint64_t block_size, Medium from, Medium to) noexcept;
    Counters counters() const noexcept;
    // With Settings::wait_subscriber_ms: whether a subscription arrived in time.
    bool subscriber_seen() const noexcept;

    struct Impl;

  private:
    explicit Publisher(std::unique_ptr<Impl> impl);
    void push(const Event *e, size_t n) noexcept;  // all n in one batch, or none
    std::unique_ptr<Impl> impl_;
    int pid_ = 0;  // the process that started the thread (a fork() child only lets go of it)
};

}  // namespace speckv::events
