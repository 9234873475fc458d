#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A router's view of speckv's KV events (docs/events.md), written against
vLLM's schema and framing, not against speckv's code: a ZeroMQ SUB socket
reads [topic, seq (8 bytes, big-endian), msgpack KVEventBatch]; a DEALER socket
asks the replay ROUTER for missed batches and reads [seq, payload] until the
end marker (seq -1, empty payload). The pool runs in another process
(events_driver); after each step the subscriber's picture -- which block
(vLLM's integer hash) lives on which medium, for which tenant -- must equal
what the pool holds, read from the pool file itself.

Usage: subscriber_test.py EVENTS_DRIVER WORKDIR [map|array [SPECKV_CLI]]: array runs the
pool with events.encoding = array and decodes the positional events of vLLM
before its map encoding (no tenant there). Exit 77 (skip) without
python3-zmq / python3-msgpack. With SPECKV_CLI, `speckv pool reset` ends the run
and must send AllBlocksCleared."""
import os
import shutil
import subprocess
import sys
import time

try:
    import msgpack
    import zmq
except ImportError as e:
    print(f"SKIP: {e} (install python3-zmq and python3-msgpack)")
    sys.exit(77)

TOPIC = b"kv-events"
END_SEQ = b"\xff" * 8  # (-1).to_bytes(8, "big", signed=True)
# Field order of the positional (array_like) events, vLLM before its map encoding.
POSITIONAL = {
    "BlockStored": ("block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name"),
    "BlockRemoved": ("block_hashes", "medium"),
    "AllBlocksCleared": (),
}


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


class Driver:
    def __init__(self, exe, work, ep, replay_ep, encoding):
        self.encoding = encoding
        self.p = subprocess.Popen([exe, os.path.join(work, "pool"), os.path.join(work, "l4"), ep, replay_ep, encoding],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def cmd(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        out = self.p.stdout.readline()
        if not out:
            fail(f"events_driver died on '{line}' (exit {self.p.wait()})")
        return out.strip()

    def do(self, line):
        out = self.cmd(line)
        if out != "ok":
            fail(f"'{line}': {out}")

    def truth(self):
        import json
        t = json.loads(self.cmd("truth"))
        blocks = {(int.from_bytes(bytes.fromhex(b["hash"])[-8:], "big"), b["medium"]):
                  b["tenant"] if self.encoding == "map" else None for b in t["blocks"]}
        return blocks, t["stats"]

    def close(self):
        self.p.stdin.write("quit\n")
        self.p.stdin.flush()
        if self.p.wait(timeout=20) != 0:
            fail(f"events_driver exited {self.p.returncode}")


class Router:
    """What a KV-aware router keeps: (hash, medium) -> tenant, and the last sequence number."""

    def __init__(self, ctx, ep, replay_ep):
        self.ctx, self.ep = ctx, ep
        self.picture = {}
        self.last = -1
        self.replayed = 0
        # DEALER, not REQ: the replay answers with many messages and a REQ
        # socket takes only the first; the empty frame is REQ's delimiter.
        self.replay = ctx.socket(zmq.DEALER)
        self.replay.connect(replay_ep)
        self.sub = None
        self.subscribe()

    def subscribe(self):
        self.sub = self.ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.SUBSCRIBE, TOPIC)
        self.sub.connect(self.ep)

    def unsubscribe(self):
        self.sub.close(linger=0)
        self.sub = None

    def apply(self, seq, payload):
        if seq != self.last + 1:
            fail(f"batch {seq} applied after {self.last}")
        batch = msgpack.unpackb(payload, raw=False, strict_map_key=False)
        if not (isinstance(batch, list) and len(batch) in (2, 3) and isinstance(batch[0], float)):
            fail(f"not a KVEventBatch [ts, events, dp_rank]: {batch!r}")
        if abs(batch[0] - time.time()) > 600:
            fail(f"ts {batch[0]} is not a wall-clock time")
        for ev in batch[1]:
            if isinstance(ev, list):  # before vLLM's map encoding: the tag, then the fields by position
                if not ev or ev[0] not in POSITIONAL:
                    fail(f"not a tagged array event: {ev!r}")
                ev = dict(zip(("type",) + POSITIONAL[ev[0]], ev))
            if not isinstance(ev, dict) or "type" not in ev:
                fail(f"not a tagged event: {ev!r}")
            kind = ev["type"]
            if kind == "BlockStored":
                if ev["parent_block_hash"] is not None or ev["token_ids"] != [] or ev["lora_id"] is not None:
                    fail(f"unexpected BlockStored fields: {ev!r}")
                if ev["block_size"] != 16:
                    fail(f"block_size {ev['block_size']} != 16 tokens")
                for h in ev["block_hashes"]:
                    self.picture[(h, ev["medium"])] = ev.get("tenant")
            elif kind == "BlockRemoved":
                for h in ev["block_hashes"]:
                    if (h, ev["medium"]) not in self.picture:
                        fail(f"BlockRemoved of {h:#x} on {ev['medium']}, never stored there")
                    del self.picture[(h, ev["medium"])]
            elif kind == "AllBlocksCleared":
                self.picture.clear()
            else:
                fail(f"unknown event type {kind!r}")
        self.last = seq

    def ask_replay(self, start):
        """vLLM's replay: 8-byte big-endian start seq in; [seq, payload]... then the end marker."""
        self.replay.send_multipart([b"", start.to_bytes(8, "big")])
        got = 0
        while True:
            if not self.replay.poll(5000):
                fail("no answer from the replay socket")
            delim, seq_b, payload = self.replay.recv_multipart()
            if delim != b"":
                fail("replay answer without the empty delimiter frame")
            if seq_b == END_SEQ:
                if payload != b"":
                    fail("end marker with a payload")
                return got
            seq = int.from_bytes(seq_b, "big")
            if seq > self.last:
                self.apply(seq, payload)
                got += 1

    def pump(self, ms):
        """Reads what arrived; a gap in the sequence is filled from the replay socket first."""
        while self.sub.poll(ms):
            ms = 0
            topic, seq_b, payload = self.sub.recv_multipart()
            if topic != TOPIC or len(seq_b) != 8:
                fail(f"bad framing: topic {topic!r}, seq {seq_b!r}")
            seq = int.from_bytes(seq_b, "big")
            if seq <= self.last:
                continue  # had it from a replay already
            if seq > self.last + 1:
                self.replayed += self.ask_replay(self.last + 1)
                if self.last < seq - 1:
                    fail(f"replay from the gap did not reach {seq}")
                if seq <= self.last:
                    continue  # the replay brought it
            self.apply(seq, payload)


def converge(router, driver, step, deadline_s=8.0):
    start = time.monotonic()
    end = start + deadline_s
    caught_up = False
    while True:
        router.pump(50)
        if not caught_up and time.monotonic() - start > 1.0:
            # Still behind after a second and nothing new arrived to show a
            # gap (the batches went out before the subscription took): ask
            # for everything after the last batch seen, as a router does
            # when it (re)connects.
            router.replayed += router.ask_replay(router.last + 1)
            caught_up = True
        truth, stats = driver.truth()
        if router.picture == truth:
            print(f"ok  {step}: {len(truth)} published blocks agree "
                  f"({sum(1 for (_, m) in truth if m == 'NVME')} on NVME, "
                  f"{sum(1 for (_, m) in truth if m == 'REMOTE')} on REMOTE), {router.last + 1} batches")
            return truth, stats
        if time.monotonic() > end:
            only_r = {k: v for k, v in router.picture.items() if k not in truth}
            only_t = {k: v for k, v in truth.items() if k not in router.picture}
            fail(f"{step}: subscriber and pool disagree: only in events {only_r}, only in the pool {only_t}; "
                 f"stats {stats}")


def reset_cleared(cli, work, ctx, router):
    """`speckv pool reset --events-endpoint` tells routers: one AllBlocksCleared,
    on a stream of its own (a new publisher: its sequence starts at 0)."""
    import json
    if not router.picture:
        fail("nothing for the reset to clear")
    ep = f"ipc://{work}/reset-events"
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, TOPIC)
    sub.connect(ep)  # the CLI binds an ipc:// endpoint; ZeroMQ connects once it is there
    out = subprocess.run([cli, "pool", "reset", f"file:{work}/pool", "--force", "--json", "--events-endpoint", ep,
                          "--events-topic", TOPIC.decode(), "--events-wait-ms", "20000"],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        fail(f"speckv pool reset exited {out.returncode}: {out.stderr}")
    res = json.loads(out.stdout)
    if res.get("events_cleared_sent") is not True or res.get("blocks_wiped", 0) < 1:
        fail(f"speckv pool reset: {res}")
    if not sub.poll(20000):
        fail("no event after speckv pool reset")
    topic, seq_b, payload = sub.recv_multipart()
    batch = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    kinds = [ev["type"] if isinstance(ev, dict) else ev[0] for ev in batch[1]]
    if topic != TOPIC or seq_b != bytes(8) or kinds != ["AllBlocksCleared"]:
        fail(f"after the reset: topic {topic!r}, seq {seq_b!r}, events {batch[1]!r}")
    n = len(router.picture)
    router.picture.clear()
    print(f"ok  pool reset: AllBlocksCleared; the router forgets {n} blocks "
          f"({res['blocks_wiped']} wiped in the pool)")
    sub.close(linger=0)


def main():
    exe, work = sys.argv[1], sys.argv[2]
    encoding = sys.argv[3] if len(sys.argv) > 3 else "map"
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    ep, replay_ep = f"ipc://{work}/events", f"ipc://{work}/replay"
    driver = Driver(exe, work, ep, replay_ep, encoding)
    ctx = zmq.Context()
    # The driver has bound both sockets once it answers.
    driver.truth()
    router = Router(ctx, ep, replay_ep)
    time.sleep(0.2)  # the subscription reaches the publisher (a batch missed meanwhile is replayed anyway)

    driver.do("store 8 1")
    driver.do("store 4 2")
    truth, _ = converge(router, driver, "publish")
    if len(truth) != 12 or set(truth.values()) != ({1, 2} if encoding == "map" else {None}):
        fail(f"expected 12 blocks of tenants 1 and 2, have {truth}")

    driver.do("demote 3")
    truth, _ = converge(router, driver, "demote to L4")
    if sum(1 for (_, m) in truth if m == "NVME") < 3:
        fail("the demoted blocks are not on NVME")

    driver.do("promote 2")
    truth, _ = converge(router, driver, "promote back")

    if os.environ.get("SPECKV_TEST_REDIS_URI"):
        # L5 behind a 1 MiB L4 file (256 KiB blocks): more demotions push the oldest L4
        # copies to the cluster (NVME -> REMOTE) and send some straight there
        # (CXL -> REMOTE); bringing them back is REMOTE -> CXL.
        # (With 256 KiB blocks in a 4 MiB pool, publishing alone already
        # pushed blocks down: demote what is left in the pool, up to 3.)
        driver.do(f"demote {min(3, sum(1 for (_, m) in truth if m == 'CXL'))}")
        truth, _ = converge(router, driver, "demote past L4, to L5")
        if sum(1 for (_, m) in truth if m == "REMOTE") < 2:
            fail("no demoted block is on REMOTE")
        driver.do("promote 4")
        truth, _ = converge(router, driver, "promote back from L4 and L5")
        # Redis loses a block's copy (as maxmemory eviction would): the read that finds out
        # misses, the pool drops the published block, and the router hears BlockRemoved.
        if any(m == "REMOTE" for (_, m) in truth):
            before = len(truth)
            driver.do("lose 1")
            truth, _ = converge(router, driver, "an L5 copy lost in the cluster")
            if len(truth) != before - 1:
                fail(f"the lost block is still listed ({len(truth)} blocks, {before} before)")

    # Unpublished blocks moving (L4 demotions for room) are not events.
    driver.do("pressure 256")
    _, stats = converge(router, driver, "allocation pressure")
    print(f"    L4 demotions so far {stats['l4_demotions']}")

    if not os.environ.get("SPECKV_TEST_REDIS_URI"):  # with L5 the pressure left none of them in the pool
        driver.do("evict 1")
        truth, stats = converge(router, driver, "evict tenant 1's blocks")
        if stats["evictions"] < 1 or (encoding == "map" and any(t == 1 and m == "CXL" for (_, m), t in truth.items())):
            fail(f"tenant 1 still has blocks in the pool after its eviction (evictions {stats['evictions']})")
        print(f"    evictions {stats['evictions']}")

    # Miss a range on purpose: no subscriber while the pool changes.
    router.unsubscribe()
    seen = router.last
    driver.do("store 6 3")
    driver.do("demote 2")
    time.sleep(0.3)  # sent with nobody subscribed: lost to the live stream
    router.subscribe()
    time.sleep(0.2)
    driver.do("store 1 3")  # the next live batch shows the gap
    truth, stats = converge(router, driver, "after a missed range, replayed")
    if router.replayed < 1 or router.last <= seen:
        fail(f"nothing was replayed (replayed {router.replayed})")
    print(f"    {router.replayed} batches replayed; publisher stats: sent {stats['events_sent']}, "
          f"batches {stats['event_batches']}, dropped {stats['events_dropped']}, replays {stats['event_replays']}")
    if stats["events_dropped"] != 0:
        fail("the publisher dropped events")

    driver.close()
    if len(sys.argv) > 4:
        reset_cleared(sys.argv[4], work, ctx, router)
    router.replay.close(linger=0)
    router.sub.close(linger=0)
    ctx.term()
    print(f"PASS ({encoding} encoding)")


if __name__ == "__main__":
    main()
