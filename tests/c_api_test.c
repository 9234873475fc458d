// SPDX-License-Identifier: Apache-2.0
/* The public API compiled as C99 (not C++), linked against libspeckv.so. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "speckv.h"

static int failures = 0;
#define EXPECT(cond)                                                                          \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "%s:%d: FAILED: %s (errmsg: %s)\n", __FILE__, __LINE__, #cond, \
                    speckv_errmsg());                                                         \
            failures++;                                                                       \
        }                                                                                     \
    } while (0)

static int log_calls = 0;
static void on_log(void *user, int level, const char *msg) {
    (void)level;
    (void)msg;
    (*(int *)user)++;
}

struct worker_arg {
    speckv_pool *pool;
    int id;
    int errors;
};

static void *worker(void *p) {
    struct worker_arg *a = (struct worker_arg *)p;
    unsigned char buf[5000], back[5000];
    int i;
    for (i = 0; i < 200; i++) {
        speckv_handle h;
        size_t n = 1 + (size_t)((i * 37 + a->id) % 5000);
        if (speckv_alloc(a->pool, n, SPECKV_DTYPE_OPAQUE, NULL, &h) != SPECKV_OK) {
            a->errors++;
            continue;
        }
        memset(buf, a->id * 16 + i, n);
        if (speckv_write(a->pool, h, 0, buf, n) != SPECKV_OK) a->errors++;
        if (speckv_access(a->pool, h, 0, back, n, 0) != SPECKV_OK || memcmp(buf, back, n) != 0) a->errors++;
        if (speckv_free(a->pool, h) != SPECKV_OK) a->errors++;
    }
    return NULL;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    char uri[512], path[480];
    speckv_config *cfg = NULL;
    speckv_pool *pool = NULL;
    speckv_handle h = SPECKV_HANDLE_INVALID;
    speckv_hint hint;
    speckv_pool_stats st;
    unsigned char data[10000], back[10000];
    const void *ptr = NULL;
    size_t len = 0, need = 0;
    char json[4096];
    int i;
    pthread_t th[4];
    struct worker_arg args[4];

    mkdir(dir, 0700);
    snprintf(path, sizeof path, "%s/c_api_%d.pool", dir, (int)getpid());
    unlink(path);

    EXPECT(speckv_version_number() == SPECKV_VERSION_NUMBER);
    EXPECT(strcmp(speckv_version_string(), SPECKV_VERSION_STRING) == 0);
    EXPECT(strcmp(speckv_strerror(SPECKV_OK), "success") == 0);
    EXPECT(strlen(speckv_strerror(-12345)) > 0);
    for (i = SPECKV_EINTERNAL; i <= SPECKV_OK; i++) EXPECT(speckv_strerror(i) != NULL);
    EXPECT(speckv_errmsg() != NULL);

    EXPECT(speckv_config_new(NULL) == SPECKV_EINVAL);
    EXPECT(speckv_config_new(&cfg) == SPECKV_OK);
    EXPECT(speckv_config_set_str(cfg, "pool.size", "16M") == SPECKV_OK);
    EXPECT(speckv_config_set_int(cfg, "pool.page_size", 3000) == SPECKV_EINVAL);
    EXPECT(strlen(speckv_errmsg()) > 0);
    EXPECT(speckv_config_set_int(cfg, "nope", 1) == SPECKV_ENOENT);
    EXPECT(speckv_config_set_int(NULL, "pool.size", 1) == SPECKV_EINVAL);
    EXPECT(speckv_config_load_toml_string(cfg, "[log]\nlevel = 3\n", 16) == SPECKV_OK);
    EXPECT(speckv_config_load_toml_string(cfg, "[log\n", 5) == SPECKV_EINVAL);
    EXPECT(speckv_config_set_log(cfg, on_log, &log_calls) == SPECKV_OK);

    snprintf(uri, sizeof uri, "file:%s", path);
    EXPECT(speckv_pool_open(uri, cfg, &pool) == SPECKV_OK);
    EXPECT(speckv_pool_open("nonsense", cfg, &pool) == SPECKV_EURI || pool != NULL);

    memset(&hint, 0, sizeof hint);
    hint.struct_size = sizeof hint;
    hint.tenant = 1;
    hint.request = 99;
    hint.layer = 3;
    hint.token_pos = 0;
    hint.token_count = 128;
    hint.flags = SPECKV_HINT_HAS_HASH;
    memset(hint.content_hash, 0xAB, sizeof hint.content_hash);
    EXPECT(speckv_alloc(pool, sizeof data, SPECKV_DTYPE_FP16, &hint, &h) == SPECKV_OK);
    EXPECT(h != SPECKV_HANDLE_INVALID);
    for (i = 0; i < (int)sizeof data; i++) data[i] = (unsigned char)(i * 7);
    EXPECT(speckv_write(pool, h, 0, data, sizeof data) == SPECKV_OK);
    EXPECT(speckv_prefetch(pool, &hint) == SPECKV_OK);
    EXPECT(speckv_access(pool, h, 0, back, sizeof back, SPECKV_ACCESS_DEFAULT) == SPECKV_OK);
    EXPECT(memcmp(data, back, sizeof data) == 0);
    EXPECT(speckv_access(pool, h, 9999, back, 2, 0) == SPECKV_ERANGE);
    EXPECT(speckv_pin(pool, h, &ptr, &len) == SPECKV_OK);
    EXPECT(len == sizeof data && memcmp(ptr, data, len) == 0);
    EXPECT(speckv_free(pool, h) == SPECKV_EBUSY);
    EXPECT(speckv_unpin(pool, h) == SPECKV_OK);

    st.struct_size = sizeof st;
    EXPECT(speckv_stats(pool, &st) == SPECKV_OK);
    EXPECT(st.blocks_live == 1 && st.prefetch_hints == 1 && st.attached == 1);
    EXPECT(speckv_stats_json(pool, json, sizeof json, &need) == SPECKV_OK);
    EXPECT(need == strlen(json) && strstr(json, "\"blocks_live\":1") != NULL);
    {   /* counters by name: the same values as the struct */
        uint64_t v = 0;
        EXPECT(speckv_stat(pool, "blocks_live", &v) == SPECKV_OK && v == 1);
        EXPECT(speckv_stat(pool, "prefetch_hints", &v) == SPECKV_OK && v == st.prefetch_hints);
        EXPECT(speckv_stat(pool, "page_size", &v) == SPECKV_OK && v == st.page_size);
        EXPECT(speckv_stat(pool, "select_calls", &v) == SPECKV_OK && v == 0); /* JSON-only counter */
        EXPECT(speckv_stat(pool, "l2_victims", &v) == SPECKV_OK && v == 0);   /* nothing evicted from L1 yet */
        EXPECT(speckv_stat(pool, "l2_victims_dropped", &v) == SPECKV_OK && v == 0);
        EXPECT(speckv_stat(pool, "hit_rate", &v) == SPECKV_EINVAL);           /* a ratio, not a counter */
        EXPECT(speckv_stat(pool, "no_such_counter", &v) == SPECKV_ENOENT);
        EXPECT(speckv_stat(pool, NULL, &v) == SPECKV_EINVAL);
        EXPECT(speckv_stat(pool, "blocks_live", NULL) == SPECKV_EINVAL);
        EXPECT(speckv_stat(NULL, "blocks_live", &v) == SPECKV_EINVAL);
    }

    /* Threads share the pool. */
    for (i = 0; i < 4; i++) {
        args[i].pool = pool;
        args[i].id = i;
        args[i].errors = 0;
        pthread_create(&th[i], NULL, worker, &args[i]);
    }
    for (i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        EXPECT(args[i].errors == 0);
    }

    EXPECT(speckv_free(pool, h) == SPECKV_OK);
    EXPECT(speckv_free(pool, h) == SPECKV_EBADHANDLE);
    EXPECT(speckv_pool_close(pool) == SPECKV_OK);
    EXPECT(speckv_pool_close(NULL) == SPECKV_OK);
    speckv_config_free(cfg);
    speckv_config_free(NULL);

    /* NULL pools everywhere: clear errors, no crash. */
    EXPECT(speckv_alloc(NULL, 1, 0, NULL, &h) == SPECKV_EINVAL);
    EXPECT(speckv_write(NULL, 1, 0, data, 1) == SPECKV_EINVAL);
    EXPECT(speckv_access(NULL, 1, 0, back, 1, 0) == SPECKV_EINVAL);
    EXPECT(speckv_stats(NULL, &st) == SPECKV_EINVAL);
    EXPECT(speckv_prefetch(NULL, &hint) == SPECKV_EINVAL);
    unlink(path);
    (void)log_calls;
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("c_api_test: all checks passed\n");
    return 0;
}
