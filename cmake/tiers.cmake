# The tier manager's building blocks (issue 5): L4 cold tier on io_uring,
# L1/L2 buffers, heat, the software TLB and the prefetch controller
# (docs/tiers.md). Appended to SPECKV_CORE_SOURCES; lib/pool.cc wires them.
set(_tiers_dir ${CMAKE_CURRENT_SOURCE_DIR}/lib)
list(APPEND SPECKV_CORE_SOURCES
  ${_tiers_dir}/cold_tier.cc
  ${_tiers_dir}/tier_buffers.cc
  ${_tiers_dir}/heat.cc
  ${_tiers_dir}/tlb.cc
  ${_tiers_dir}/prefetch_ctl.cc)
