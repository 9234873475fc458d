// SPDX-License-Identifier: Apache-2.0
/* Prints speckv_block_hash results for the cases check_block_hash.py
 * recomputes independently: "<algo> <tenant> <parent|-> <tokens,...|-> <extra hex|-> <hash>". */
#include <stdio.h>
#include <string.h>

#include "speckv.h"

static void hex(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) printf("%02x", p[i]);
}

static int one(int algo, uint64_t tenant, const uint8_t *parent, const uint32_t *tok, size_t n, const uint8_t *extra,
               size_t elen, uint8_t out[SPECKV_HASH_BYTES]) {
    int rc = speckv_block_hash(algo, tenant, parent, tok, n, extra, elen, out);
    if (rc != SPECKV_OK) {
        fprintf(stderr, "speckv_block_hash: %s: %s\n", speckv_strerror(rc), speckv_errmsg());
        return 1;
    }
    printf("%d %llu ", algo, (unsigned long long)tenant);
    if (parent) hex(parent, SPECKV_HASH_BYTES);
    else printf("-");
    printf(" ");
    if (n == 0) printf("-");
    for (size_t i = 0; i < n; i++) printf(i ? ",%u" : "%u", tok[i]);
    printf(" ");
    if (extra) hex(extra, elen);
    else printf("-");
    printf(" ");
    hex(out, SPECKV_HASH_BYTES);
    printf("\n");
    return 0;
}

int main(void) {
    uint32_t tok[512];
    for (int i = 0; i < 512; i++) tok[i] = (uint32_t)(i * 2654435761u) % 128256u;
    uint32_t wide[6] = {0, 23, 24, 255, 65536, 4294967295u};
    /* CBOR extras: ["lora-7", 3] and null-free text "model" */
    const uint8_t extra_arr[] = {0x82, 0x66, 'l', 'o', 'r', 'a', '-', '7', 0x03};
    const uint8_t extra_raw[] = {'m', 'o', 'd', 'e', 'l'};
    uint8_t h1[SPECKV_HASH_BYTES], h2[SPECKV_HASH_BYTES], h3[SPECKV_HASH_BYTES];
    int bad = 0;
    for (int algo = 0; algo <= 1; algo++) {
        bad |= one(algo, 0, NULL, tok, 512, NULL, 0, h1);
        bad |= one(algo, 0, h1, tok + 256, 256, NULL, 0, h2);
        bad |= one(algo, 42, h2, wide, 6, algo ? extra_arr : extra_raw, algo ? sizeof extra_arr : sizeof extra_raw, h3);
        bad |= one(algo, 7, NULL, NULL, 0, NULL, 0, h3);
    }
    return bad;
}
