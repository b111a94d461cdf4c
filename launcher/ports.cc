#include "launcher/ports.h"

#include <fmt/format.h>

#include <string>

#include "core/error.h"
#include "core/parse.h"

namespace dl {

std::vector<std::uint16_t> parse_port_list(std::string_view text) {
  constexpr const char* kName = "SLURM_STEP_RESV_PORTS";
  const auto fail = [&] {
    return InputError(fmt::format(
        "{}={}: expected port ranges such as 12000-12003 or 12000-12001,12005", kName, text));
  };
  std::vector<std::uint16_t> ports;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, comma - start);
    const std::size_t dash = item.find('-');
    std::uint64_t first = 0;
    std::uint64_t last = 0;
    try {
      first = parse_uint(kName, item.substr(0, dash), 1, 65535);
      last = dash == std::string_view::npos ? first
                                            : parse_uint(kName, item.substr(dash + 1), 1, 65535);
    } catch (const InputError&) {
      throw fail();
    }
    if (last < first) throw fail();
    for (std::uint64_t p = first; p <= last; ++p) ports.push_back(static_cast<std::uint16_t>(p));
    start = comma + 1;
  }
  return ports;
}

std::optional<std::uint16_t> first_free_port(const std::vector<std::uint16_t>& candidates,
                                             const std::function<bool(std::uint16_t)>& is_free) {
  for (const std::uint16_t p : candidates) {
    if (is_free(p)) return p;
  }
  return std::nullopt;
}

}  // namespace dl
