// SPDX-License-Identifier: Apache-2.0
// The pool lock (pool/pool_lock.h).
#include "pool/pool_lock.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>

#include <cstring>

#include "util/status.h"

namespace speckv {

int PoolLock::acquire(bool *owner_died) {
    *owner_died = false;
    fmt::SharedHeader *h = sh_;
    if (h->lock_magic != fmt::kLockMagic)
        return fail(SPECKV_ECORRUPT, "the pool's lock is not initialised: metadata corrupt (speckv pool reset --force)");
    int e = pthread_mutex_trylock(&h->lock);  // the common, uncontended case: no clock read
    if (e == EBUSY) {
        timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += timeout_ms_ / 1000;
        ts.tv_nsec += (timeout_ms_ % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        e = pthread_mutex_timedlock(&h->lock, &ts);
    }
    if (e == EOWNERDEAD) {
        pthread_mutex_consistent(&h->lock);
        *owner_died = true;
        return SPECKV_OK;
    }
    if (e == ETIMEDOUT)
        return fail(SPECKV_EBUSY, "pool lock not acquired within %d ms (another process holds it)", timeout_ms_);
    if (e == ENOTRECOVERABLE)
        return fail(SPECKV_ECORRUPT, "the pool's lock is unrecoverable (speckv pool reset --force)");
    if (e) return fail(SPECKV_EINTERNAL, "pthread_mutex_timedlock: %s", strerror(e));
    return SPECKV_OK;
}

void PoolLock::release() { pthread_mutex_unlock(&sh_->lock); }

}  // namespace speckv
