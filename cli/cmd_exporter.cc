// SPDX-License-Identifier: Apache-2.0
// `speckv exporter --listen HOST:PORT URI...`: serves the counters of the
// pools at http://HOST:PORT/metrics in the Prometheus text format (the names:
// prometheus.cc), each scrape reading the pools afresh, read-only. HTTP from
// Debian's cpp-httplib. SIGINT or SIGTERM stops it cleanly (exit 0).
#include <httplib.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "prometheus.h"
#include "util/json.h"
#include "util/text.h"

namespace speckv_cli {
namespace {

// "127.0.0.1:9100", "[::1]:9100", "localhost:0" (0: any free port).
bool parse_listen(const std::string &s, std::string *host, int *port) {
    size_t colon = s.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == s.size()) return false;
    *host = s.substr(0, colon);
    if (host->size() > 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
    const char *b = s.data() + colon + 1, *e = s.data() + s.size();
    auto r = std::from_chars(b, e, *port);
    return r.ec == std::errc() && r.ptr == e && *port >= 0 && *port <= 65535;
}

}  // namespace

void register_exporter_command(CLI::App &app) {
    auto *ex = app.add_subcommand(
        "exporter", "Serve the counters of pools at http://HOST:PORT/metrics for Prometheus (each scrape reads them afresh)");
    static std::string listen;
    static std::vector<std::string> uris;
    ex->add_option("--listen", listen, "HOST:PORT to listen on, e.g. 127.0.0.1:9464 (port 0: any free port)")
        ->required();
    ex->add_option("URI", uris, "pools: file:/path or a plain path, file:NAME, dax:/dev/daxX.Y, numa:N?name=NAME")
        ->required();
    add_json(ex, "errors as one JSON object on stdout; on start, {\"url\": ...} instead of the text line");
    ex->callback([] {
        std::string host;
        int port = 0;
        if (!parse_listen(listen, &host, &port)) {
            error("--listen " + listen + ": expected HOST:PORT, e.g. 127.0.0.1:9464");
            return void(g_exit = 2);
        }
        for (auto &u : uris) u = pool_uri(u);
        // A pool named twice would repeat its series (invalid exposition): once each.
        std::vector<std::string> once;
        for (const auto &u : uris)
            if (std::find(once.begin(), once.end(), u) == once.end()) once.push_back(u);
        uris.swap(once);
        // Every pool must be readable now: a typo is an error, not a pool
        // that is down (later, a pool that cannot be read is speckv_pool_up 0).
        std::vector<PoolError> errors;
        prometheus_text(uris, &errors);
        if (!errors.empty()) {
            error(errors.front().message, errors.front().code);
            return void(g_exit = 1);
        }
        // SIGINT and SIGTERM go to one thread, which stops the server: block
        // them before the server starts its threads (they inherit the mask).
        sigset_t stop_set;
        sigemptyset(&stop_set);
        sigaddset(&stop_set, SIGINT);
        sigaddset(&stop_set, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &stop_set, nullptr);

        httplib::Server srv;
        std::mutex scrape;  // one scrape at a time: they are cheap, and the pools are read once each
        srv.Get("/metrics", [&](const httplib::Request &, httplib::Response &res) {
            std::lock_guard<std::mutex> g(scrape);
            res.set_content(prometheus_text(uris), kPrometheusContentType);
        });
        srv.Get("/", [](const httplib::Request &, httplib::Response &res) {
            res.set_content("speckv exporter: the metrics are at /metrics\n", "text/plain; charset=utf-8");
        });
        srv.set_error_handler([](const httplib::Request &req, httplib::Response &res) {
            if (res.status == 404)
                res.set_content("not found: " + req.path + " (the metrics are at /metrics)\n", "text/plain; charset=utf-8");
        });
        // SO_REUSEADDR only: cpp-httplib's default adds SO_REUSEPORT, with
        // which a second exporter would share the port instead of failing.
        srv.set_socket_options([](int sock) {
            int yes = 1;
            setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
        });
        errno = 0;
        int bound = port == 0 ? srv.bind_to_any_port(host) : (srv.bind_to_port(host, port) ? port : -1);
        if (bound < 0) {
            int e = errno;
            error("cannot listen on " + listen + ": " +
                      (e ? std::string(std::strerror(e)) : std::string("address in use or not of this machine")),
                  SPECKV_EBUSY);
            return void(g_exit = 1);
        }
        std::string shown = host.find(':') != std::string::npos ? "[" + host + "]" : host;
        std::string url = "http://" + shown + ":" + std::to_string(bound) + "/metrics";
        if (g_opt.json) std::printf("%s\n", speckv::json_text({{"url", url}, {"pools", uris.size()}}).c_str());
        else std::printf("speckv exporter: %zu pool%s at %s\n", uris.size(), uris.size() == 1 ? "" : "s", url.c_str());
        std::fflush(stdout);

        std::thread stopper([&] {
            int sig = 0;
            sigwait(&stop_set, &sig);
            // stop() does nothing before listen_after_bind() has begun.
            for (int k = 0; k < 200 && !srv.is_running(); k++) std::this_thread::sleep_for(std::chrono::milliseconds(5));
            srv.stop();
        });
        bool ok = srv.listen_after_bind();
        if (!ok && srv.is_running()) {
            error("the server stopped: " + std::string(std::strerror(errno)), SPECKV_EIO);
            g_exit = 1;
        }
        // A stop that did not come from a signal: wake the stopper.
        pthread_kill(stopper.native_handle(), SIGTERM);
        stopper.join();
    });
}

}  // namespace speckv_cli
