// SPDX-License-Identifier: Apache-2.0
// BlockIO: a block's bytes, by handle: write, read, pin and unpin
// (speckv_write, speckv_read, speckv_pin, speckv_unpin; docs/pool-format.md
// "Pages", "Packed blocks"). It resolves the handle, brings a block in L4
// back into the pool (ColdRole), unpacks a packed block before a write or a
// pin (Packer), then goes page by page through PageWriter and PageReader. A
// block that moves between tiers under it is resolved again (at most 16
// times). It counts what each call did (PoolCounters), tells the prefetch
// engine where a read came from, and keeps the pin registry (ProcessRefs)
// with the reference a pin holds (BlockTable). The prefetch engine's job of
// bringing a block into L2 is here too (the same resolve and L4 steps).
//
// It is bound to the image and the parts it works on; it never holds the
// Pool.
#pragma once
#include <cstddef>
#include <cstdint>

#include "pool/block_resolver.h"
#include "pool/block_table.h"
#include "pool/codec_choice.h"
#include "pool/counters.h"
#include "pool/image.h"
#include "pool/packer.h"
#include "pool/page_reader.h"
#include "pool/page_writer.h"
#include "pool/refs.h"
#include "speckv.h"

namespace speckv {

class ColdRole;        // pool/cold_role.h
class PageCache;       // tiers/page_cache.h (L1)
class PrefetchEngine;  // prefetch/engine.h

class BlockIO {
  public:
    struct Parts {
        const BlockResolver *resolver;
        ColdRole *cold;
        ProcessRefs *refs;
        BlockTable *blocks;
        Packer *packer;
        PageReader *reader;
        PageWriter *writer;
        const CodecChoice *codec;
        PrefetchEngine *pf;
        PoolCounters *counters;
    };
    void bind(const PoolLayout &L, const Parts &parts, bool read_only) {
        L_ = L;
        p_ = parts;
        read_only_ = read_only;
    }
    void set_l1(PageCache *l1) { l1_ = l1; }
    // config codec.pack: the write that completes a coded block packs it.
    void set_pack(bool on) { pack_ = on; }

    int write(uint64_t handle, uint64_t off, const void *src, size_t len);
    int read(uint64_t handle, uint64_t off, void *dst, size_t len);
    int pin(uint64_t handle, const void **ptr, size_t *len);
    int unpin(uint64_t handle);
    // The prefetch engine's job (PrefetchPorts::fetch_block): block handle's
    // pages into L2 for `owner`, unless it is the block the request appends
    // to (it covers token skip_from or the next). Returns the pages brought
    // in; *link += the bytes that crossed L3 -> L2.
    uint64_t prefetch_block(uint64_t handle, uint64_t owner, uint64_t skip_from, uint64_t *link);

  private:
    // Resolves handle into *r and brings the block back from L4 if it is there.
    __attribute__((always_inline)) int resolve_hot(uint64_t handle, BlockView *r) const {
        if (int rc = p_.resolver->resolve(handle, r); rc != SPECKV_OK) return rc;
        if (r->cold()) [[unlikely]]
            return bring_back(handle, r);
        return SPECKV_OK;
    }
    int bring_back(uint64_t handle, BlockView *r) const;  // ColdRole::ensure_hot
    // Defined in block_io.cc before their one caller, and inlined there.
    inline int register_pin(uint64_t handle, const BlockView &r, bool *moved);
    inline void count_read(const BlockView &r, uint64_t handle, uint64_t hits, uint64_t misses, uint64_t l2, size_t len,
                           bool ok);

    PoolLayout L_;
    Parts p_{};
    PageCache *l1_ = nullptr;
    bool read_only_ = false;
    bool pack_ = true;
};

}  // namespace speckv
