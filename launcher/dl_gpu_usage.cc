// dl-gpu-usage: GPU-hours allocated and used per user or account over a period, asked of
// the Prometheus server that scrapes dl-gpu-metrics (launcher/usage_report.h). See
// man/dl-gpu-usage.8.
#include <fmt/format.h>
#include <httplib.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <string>

#include "core/cli.h"
#include "core/error.h"
#include "core/parse.h"
#include "launcher/usage_report.h"

namespace dl {
namespace {

constexpr int kExitUsage = 2;

nlohmann::json ask(httplib::Client& prometheus, const std::string& url, const std::string& query) {
  const auto res =
      prometheus.Get("/api/v1/query", httplib::Params{{"query", query}}, httplib::Headers{});
  if (!res) {
    throw SystemError(fmt::format("couldn't ask {}: {}", url, httplib::to_string(res.error())));
  }
  auto answer = nlohmann::json::parse(res->body, nullptr, false);
  if (answer.is_discarded()) {
    throw SystemError(
        fmt::format("{} answered HTTP {} and no JSON (is it Prometheus?)", url, res->status));
  }
  return answer;
}

int run(int argc, char** argv) {
  CLI::App app{
      "dl-gpu-usage: GPU-hours allocated and used per user or account over a period, from the "
      "Prometheus server that scrapes dl-gpu-metrics"};
  std::string url;
  std::string by = "user";
  std::string period_text = "7d";
  std::string resolution_text = "1m";
  bool json = false;
  app.add_option("--prometheus", url, "the Prometheus server, e.g. http://prometheus:9090")
      ->required();
  app.add_option("--by", by, "user or account")->capture_default_str();
  app.add_option("--since", period_text, "the period, up to now: 1m to 400d")
      ->capture_default_str();
  app.add_option("--resolution", resolution_text,
                 "how often each GPU is counted (at least the scrape interval): 1s to 1h")
      ->capture_default_str();
  app.add_flag("--json", json, "one JSON object instead of the table");
  add_standard_flags(app, "dl-gpu-usage");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitUsage;
  }
  UsageQuery q;
  try {
    if (by != "user" && by != "account") {
      throw InputError(fmt::format("--by={}: expected user or account", by));
    }
    q.by = by;
    q.period = parse_duration("--since", period_text, std::chrono::seconds(60),
                              std::chrono::hours(400 * 24));
    q.resolution = parse_duration("--resolution", resolution_text, std::chrono::seconds(1),
                                  std::chrono::hours(1));
    if (q.resolution > q.period) {
      throw InputError(
          fmt::format("--resolution={}: longer than --since={}", resolution_text, period_text));
    }
    if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) {
      throw InputError(
          fmt::format("--prometheus={}: expected http://HOST:PORT or https://...", url));
    }
  } catch (const InputError& e) {
    std::fprintf(stderr, "dl-gpu-usage: %s\n", e.what());
    return kExitUsage;
  }
  httplib::Client prometheus(url);
  prometheus.set_connection_timeout(10);
  prometheus.set_read_timeout(120);
  UsageReport report;
  add_answer(report, q, "allocated", ask(prometheus, url, allocated_query(q)));
  add_answer(report, q, "used", ask(prometheus, url, used_query(q)));
  add_answer(report, q, "jobs", ask(prometheus, url, jobs_query(q)));
  if (json) {
    std::cout << usage_to_json(report, q).dump(2) << '\n';
  } else {
    std::cout << fmt::format("GPU use by {} over the last {}, as Prometheus at {} has it:\n\n",
                             q.by, period_text, url)
              << format_usage(report, q);
  }
  return 0;
}

}  // namespace
}  // namespace dl

int main(int argc, char** argv) { return dl::run_tool("dl-gpu-usage", dl::run, argc, argv); }
