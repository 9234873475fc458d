/* SPDX-License-Identifier: Apache-2.0 */
/* Uses the experimental interface (page selection): compiles only when the
 * includer defines SPECKV_EXPERIMENTAL (tests header_experimental_*). */
#include "speckv.h"

int main(void) {
    speckv_select_params p = {sizeof p, 1, 64, 1, 4, 0, 0.0f, 0.0f, 0, 0};
    (void)p;
    return speckv_merge_partials(1, 64, NULL, NULL, NULL) == SPECKV_EINVAL ? 0 : 1;
}
