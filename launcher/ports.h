// Choosing MASTER_PORT. Slurm gives every step ports that no other step on the same
// node holds (MpiParams=ports=... -> SLURM_STEP_RESV_PORTS), so two jobs sharing a node
// never pick the same one; rank 0 still checks that the port is free right now, since
// a process outside Slurm may hold it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

namespace dl {

// SLURM_STEP_RESV_PORTS: "12000-12003" or "12000-12001,12005". Throws dl::InputError
// naming the variable and the value.
std::vector<std::uint16_t> parse_port_list(std::string_view text);

// The first of `candidates` that `is_free` accepts, in order.
std::optional<std::uint16_t> first_free_port(const std::vector<std::uint16_t>& candidates,
                                             const std::function<bool(std::uint16_t)>& is_free);

}  // namespace dl
