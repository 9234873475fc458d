// SPDX-License-Identifier: Apache-2.0
// Pool counters in the Prometheus text exposition format (version 0.0.4):
// `speckv pool stats --format prometheus` and `speckv exporter` both print
// through here, so the names (the table in prometheus.cc) are written once.
#pragma once
#include <string>
#include <vector>

namespace speckv_cli {

// Why a pool could not be read: the SPECKV_E* code and "<uri>: <reason>".
struct PoolError {
    int code;
    std::string message;
};

// Reads each pool read-only (no attach record, nothing written) and returns
// the exposition text for all of them: one HELP/TYPE header per metric, one
// sample per pool (label pool="<uri>") and, for the per-process counters, per
// attached process (labels process="<pid>", attach_id) plus process="gone"
// (the totals of processes that have detached or died). A pool that cannot
// be read shows as speckv_pool_up 0 with no other samples; its reason goes
// to *errors (one line per pool) when errors is not null.
std::string prometheus_text(const std::vector<std::string> &uris, std::vector<PoolError> *errors = nullptr);

// The Content-Type of that text.
inline constexpr const char *kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace speckv_cli
