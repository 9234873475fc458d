// SPDX-License-Identifier: Apache-2.0
// KV events (docs/events.md): the encoder's bytes decode (msgpack-c's
// unpacker, independent of the packer calls) to vLLM's KVEventBatch; the
// publisher frames, numbers and replays batches as vLLM does; a bad endpoint
// fails the open clearly; a full queue drops and counts, never blocks.
#include <doctest/doctest.h>
#include <msgpack.h>
#include <unistd.h>
#include <zmq.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "events/encode.h"
#include "events/publisher.h"
#include "speckv.h"

using namespace speckv::events;

namespace {

struct Decoded {
    msgpack_unpacked u;
    explicit Decoded(const std::string &bytes) {
        msgpack_unpacked_init(&u);
        size_t off = 0;
        REQUIRE(msgpack_unpack_next(&u, bytes.data(), bytes.size(), &off) == MSGPACK_UNPACK_SUCCESS);
        CHECK(off == bytes.size());
    }
    ~Decoded() { msgpack_unpacked_destroy(&u); }
    const msgpack_object &root() const { return u.data; }
};

std::string s(const msgpack_object &o) {
    REQUIRE(o.type == MSGPACK_OBJECT_STR);
    return std::string(o.via.str.ptr, o.via.str.size);
}

const msgpack_object *field(const msgpack_object &m, const char *key) {
    REQUIRE(m.type == MSGPACK_OBJECT_MAP);
    for (uint32_t i = 0; i < m.via.map.size; i++)
        if (s(m.via.map.ptr[i].key) == key) return &m.via.map.ptr[i].val;
    return nullptr;
}

Event ev(Kind k, Medium m, uint64_t tenant, uint8_t fill) {
    Event e;
    e.kind = k;
    e.medium = m;
    e.tenant = tenant;
    e.block_size = 16;
    for (int i = 0; i < 32; i++) e.hash[i] = static_cast<uint8_t>(fill + i);
    return e;
}

std::string tmpdir() {
    const char *base = getenv("SPECKV_TEST_TMP");
    std::string d = std::string(base ? base : "/tmp") + "/events-" + std::to_string(getpid());
    std::string cmd = "mkdir -p '" + d + "'";
    REQUIRE(system(cmd.c_str()) == 0);
    return d;
}

std::vector<std::string> recv_all(void *sock, int timeout_ms) {
    std::vector<std::string> parts;
    zmq_setsockopt(sock, ZMQ_RCVTIMEO, &timeout_ms, sizeof timeout_ms);
    for (;;) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, sock, 0) < 0) {
            zmq_msg_close(&m);
            return parts;
        }
        parts.emplace_back(static_cast<const char *>(zmq_msg_data(&m)), zmq_msg_size(&m));
        bool more = zmq_msg_more(&m);
        zmq_msg_close(&m);
        if (!more) return parts;
    }
}

}  // namespace

TEST_CASE("media: CXL (L3), NVME (L4), REMOTE (L5 behind L4), each its own string") {
    CHECK(std::string(medium_name(Medium::kPool)) == "CXL");
    CHECK(std::string(medium_name(Medium::kCold)) == "NVME");
    CHECK(std::string(medium_name(Medium::kRemote)) == "REMOTE");
}

TEST_CASE("external hash: the last 8 bytes, big-endian (vLLM's integer block hash)") {
    uint8_t h[32] = {};
    for (int i = 0; i < 32; i++) h[i] = static_cast<uint8_t>(i);
    CHECK(external_hash(h) == 0x18191a1b1c1d1e1full);
    h[24] = 0xff;
    CHECK(external_hash(h) == 0xff191a1b1c1d1e1full);
}

TEST_CASE("map encoding: [ts, [tagged maps...], 0] with vLLM v0.26.0's field names") {
    const Event in[3] = {ev(Kind::kStored, Medium::kPool, 7, 0x10), ev(Kind::kRemoved, Medium::kCold, 9, 0x40),
                         ev(Kind::kCleared, Medium::kPool, 0, 0)};
    std::string bytes;
    encode_batch(1234.5, in, 3, Encoding::kMap, &bytes);
    Decoded d(bytes);
    const msgpack_object &b = d.root();
    REQUIRE(b.type == MSGPACK_OBJECT_ARRAY);
    REQUIRE(b.via.array.size == 3);
    CHECK(b.via.array.ptr[0].type == MSGPACK_OBJECT_FLOAT64);
    CHECK(b.via.array.ptr[0].via.f64 == 1234.5);
    CHECK(b.via.array.ptr[2].type == MSGPACK_OBJECT_POSITIVE_INTEGER);
    CHECK(b.via.array.ptr[2].via.u64 == 0);
    const msgpack_object &evs = b.via.array.ptr[1];
    REQUIRE(evs.type == MSGPACK_OBJECT_ARRAY);
    REQUIRE(evs.via.array.size == 3);

    const msgpack_object &st = evs.via.array.ptr[0];
    REQUIRE(st.type == MSGPACK_OBJECT_MAP);
    CHECK(st.via.map.size == 9);
    CHECK(s(st.via.map.ptr[0].key) == "type");  // the tag first, as msgspec writes it
    CHECK(s(*field(st, "type")) == "BlockStored");
    const msgpack_object *hs = field(st, "block_hashes");
    REQUIRE(hs);
    REQUIRE(hs->type == MSGPACK_OBJECT_ARRAY);
    REQUIRE(hs->via.array.size == 1);
    CHECK(hs->via.array.ptr[0].via.u64 == external_hash(in[0].hash));
    CHECK(field(st, "parent_block_hash")->type == MSGPACK_OBJECT_NIL);
    CHECK(field(st, "token_ids")->type == MSGPACK_OBJECT_ARRAY);
    CHECK(field(st, "token_ids")->via.array.size == 0);
    CHECK(field(st, "block_size")->via.u64 == 16);
    CHECK(field(st, "lora_id")->type == MSGPACK_OBJECT_NIL);
    CHECK(s(*field(st, "medium")) == "CXL");
    CHECK(field(st, "lora_name")->type == MSGPACK_OBJECT_NIL);
    CHECK(field(st, "tenant")->via.u64 == 7);

    const msgpack_object &rm = evs.via.array.ptr[1];
    CHECK(rm.via.map.size == 4);
    CHECK(s(*field(rm, "type")) == "BlockRemoved");
    CHECK(field(rm, "block_hashes")->via.array.ptr[0].via.u64 == external_hash(in[1].hash));
    CHECK(s(*field(rm, "medium")) == "NVME");
    CHECK(field(rm, "tenant")->via.u64 == 9);

    const msgpack_object &cl = evs.via.array.ptr[2];
    CHECK(cl.via.map.size == 1);
    CHECK(s(*field(cl, "type")) == "AllBlocksCleared");
}

TEST_CASE("array encoding: the positional tagged arrays of vLLM before the map encoding") {
    const Event in[3] = {ev(Kind::kStored, Medium::kCold, 7, 0x10), ev(Kind::kRemoved, Medium::kPool, 9, 0x40),
                         ev(Kind::kCleared, Medium::kPool, 0, 0)};
    std::string bytes;
    encode_batch(2.0, in, 3, Encoding::kArray, &bytes);
    Decoded d(bytes);
    const msgpack_object &evs = d.root().via.array.ptr[1];
    const msgpack_object &st = evs.via.array.ptr[0];
    REQUIRE(st.type == MSGPACK_OBJECT_ARRAY);
    REQUIRE(st.via.array.size == 8);
    const msgpack_object *f = st.via.array.ptr;
    CHECK(s(f[0]) == "BlockStored");
    CHECK(f[1].via.array.ptr[0].via.u64 == external_hash(in[0].hash));
    CHECK(f[2].type == MSGPACK_OBJECT_NIL);   // parent_block_hash
    CHECK(f[3].via.array.size == 0);          // token_ids
    CHECK(f[4].via.u64 == 16);                // block_size
    CHECK(f[5].type == MSGPACK_OBJECT_NIL);   // lora_id
    CHECK(s(f[6]) == "NVME");                 // medium
    CHECK(f[7].type == MSGPACK_OBJECT_NIL);   // lora_name
    const msgpack_object &rm = evs.via.array.ptr[1];
    REQUIRE(rm.via.array.size == 3);
    CHECK(s(rm.via.array.ptr[0]) == "BlockRemoved");
    CHECK(s(rm.via.array.ptr[2]) == "CXL");
    const msgpack_object &cl = evs.via.array.ptr[2];
    REQUIRE(cl.via.array.size == 1);
    CHECK(s(cl.via.array.ptr[0]) == "AllBlocksCleared");
}

TEST_CASE("publisher: [topic, seq, payload] on PUB, and vLLM's replay with its end marker") {
    const std::string dir = tmpdir();
    Settings st;
    st.endpoint = "ipc://" + dir + "/pub";
    st.replay_endpoint = "ipc://" + dir + "/replay";
    st.topic = "kv";
    std::unique_ptr<Publisher> p;
    REQUIRE(Publisher::start(st, &p) == SPECKV_OK);

    void *ctx = zmq_ctx_new();
    void *sub = zmq_socket(ctx, ZMQ_SUB);
    zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "kv", 2);
    REQUIRE(zmq_connect(sub, st.endpoint.c_str()) == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the subscription reaches the publisher

    uint8_t h[32] = {};
    h[31] = 5;
    p->stored(3, h, 16, Medium::kPool);
    std::vector<std::string> m = recv_all(sub, 5000);
    REQUIRE(m.size() == 3);
    CHECK(m[0] == "kv");
    CHECK(m[1] == std::string(8, '\0'));  // seq 0
    {
        Decoded d(m[2]);
        CHECK(d.root().via.array.ptr[1].via.array.size == 1);
    }
    p->moved(3, h, 16, Medium::kPool, Medium::kCold);
    m = recv_all(sub, 5000);
    REQUIRE(m.size() == 3);
    CHECK(m[1] == std::string("\0\0\0\0\0\0\0\1", 8));  // seq 1

    void *dealer = zmq_socket(ctx, ZMQ_DEALER);
    REQUIRE(zmq_connect(dealer, st.replay_endpoint.c_str()) == 0);
    const char start[8] = {0, 0, 0, 0, 0, 0, 0, 1};
    zmq_send(dealer, "", 0, ZMQ_SNDMORE);
    zmq_send(dealer, start, 8, 0);
    m = recv_all(dealer, 5000);
    REQUIRE(m.size() == 3);
    CHECK(m[0].empty());
    CHECK(m[1] == std::string("\0\0\0\0\0\0\0\1", 8));
    {
        Decoded d(m[2]);  // the batch of seq 1: Removed CXL, Stored NVME
        const msgpack_object &evs = d.root().via.array.ptr[1];
        REQUIRE(evs.via.array.size == 2);
        CHECK(s(*field(evs.via.array.ptr[0], "type")) == "BlockRemoved");
        CHECK(s(*field(evs.via.array.ptr[1], "medium")) == "NVME");
    }
    m = recv_all(dealer, 5000);
    REQUIRE(m.size() == 3);
    CHECK(m[1] == std::string(8, '\xff'));  // the end marker: seq -1, empty payload
    CHECK(m[2].empty());
    // A malformed request (a 2-byte "seq" is still a number; 9 bytes is not) gets nothing.
    zmq_send(dealer, "", 0, ZMQ_SNDMORE);
    zmq_send(dealer, "123456789", 9, 0);
    CHECK(recv_all(dealer, 300).empty());
    Counters c = p->counters();
    CHECK(c.batches == 2);
    CHECK(c.events == 3);
    CHECK(c.dropped == 0);
    CHECK(c.replays == 1);
    zmq_close(dealer);
    zmq_close(sub);
    zmq_ctx_term(ctx);
    p.reset();
}

TEST_CASE("publisher: no subscriber and a full queue cost nothing but counted drops") {
    const std::string dir = tmpdir();
    Settings st;
    st.endpoint = "ipc://" + dir + "/nobody";
    st.queue = 64;
    std::unique_ptr<Publisher> p;
    REQUIRE(Publisher::start(st, &p) == SPECKV_OK);
    uint8_t h[32] = {};
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 200000; i++) p->removed(1, h, Medium::kPool);
    const double s_taken = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(s_taken < 5.0);  // not a speed target: a hang or a blocking send would exceed it by far
    for (int i = 0; i < 100; i++) {
        Counters c = p->counters();
        if (c.events + c.dropped == 200000) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    Counters c = p->counters();
    CHECK(c.events + c.dropped == 200000);
    CHECK(c.events > 0);
    p.reset();
}

TEST_CASE("pool open: a bad events endpoint fails clearly; events off by default") {
    speckv_config *cfg = nullptr;
    REQUIRE(speckv_config_new(&cfg) == SPECKV_OK);
    REQUIRE(speckv_config_set_str(cfg, "events.endpoint", "nonsense://x") == SPECKV_OK);
    speckv_pool *pool = nullptr;
    CHECK(speckv_pool_open("anon:?size=4M", cfg, &pool) == SPECKV_EINVAL);
    CHECK(pool == nullptr);
    CHECK(std::string(speckv_errmsg()).find("events.endpoint") != std::string::npos);
    speckv_config_free(cfg);

    REQUIRE(speckv_config_new(&cfg) == SPECKV_OK);
    REQUIRE(speckv_config_set_str(cfg, "events.replay_endpoint", "ipc:///nowhere") == SPECKV_OK);
    CHECK(speckv_pool_open("anon:?size=4M", cfg, &pool) == SPECKV_EINVAL);
    CHECK(std::string(speckv_errmsg()).find("events.endpoint") != std::string::npos);
    speckv_config_free(cfg);

    REQUIRE(speckv_pool_open("anon:?size=4M", nullptr, &pool) == SPECKV_OK);
    std::vector<char> js(1 << 16);
    size_t need = 0;
    REQUIRE(speckv_stats_json(pool, js.data(), js.size(), &need) == SPECKV_OK);
    CHECK(std::string(js.data()).find("events_sent") == std::string::npos);
    CHECK(speckv_pool_close(pool) == SPECKV_OK);
}
