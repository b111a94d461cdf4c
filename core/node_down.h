// Marking a failed batch host DOWN at once (issue 13): when a job's batch host fails,
// dlrun's launcher dies with it and only slurmctld can requeue the job, which it does when
// it marks the node DOWN (SlurmdTimeout, 300 s by default). A surviving rank's dlrun that
// lost rank 0 on another node ends with kExitLostLeader; spank_dl.so, as root in that
// node's slurmstepd and with down_failed_batch_host=yes, then checks the job's batch host
// itself (slurmctld's word for which node it is, TCP connections to its slurmd) and marks
// it DOWN when they are refused. Pure; the plugin's adapter
// (spank/slurmstepd.cc) runs sinfo, scontrol and the connections.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/net.h"

namespace dl {

// The exit status of a rank's dlrun that lost rank 0 on another node, when the plugin
// asks for it (DL_LOST_LEADER_EXIT in the task's environment). It triggers the check and
// proves nothing: a user's program can exit with it too.
inline constexpr int kExitLostLeader = 78;

// One node as `sinfo -h -N -n NODE -O NodeAddr:|,Port:|,StateComplete:|` prints it
// ("127.0.0.1|6818|mixed+not_responding|"; one such line per partition of the node).
struct NodeLine {
  std::string address;              // NodeAddr: a host name or an address
  std::uint16_t port = 0;           // slurmd's port
  std::vector<std::string> states;  // "mixed", "drain", "not_responding", ...
};

// The first line of that output; throws dl::InputError on anything else (an unknown node
// gives no line).
NodeLine parse_node_line(std::string_view text);

// Whether slurmctld has marked the node DOWN already.
bool known_down(const NodeLine& node);

// What connections to a node's slurmd, some seconds apart, say about it (`probes`:
// what each found, oldest first; see net::Reach). Dead after kDeadAfterRefusals
// refusals in a row, alive after kAliveAfterAnswers answers in a row; undecided until
// then, and silence (no answer in time) never decides: a user on that node can fill
// slurmd's listen queue with idle connections, but cannot make its kernel refuse one or
// the network find the host gone. One answer is not enough either: a node killed a
// moment ago can still accept a connection while its processes die. The caller stops
// after kMaxProbes and leaves an undecided node to Slurm.
enum class ProbeVerdict { undecided, alive, dead };
inline constexpr int kDeadAfterRefusals = 3;
inline constexpr int kAliveAfterAnswers = 2;
inline constexpr int kMaxProbes = 6;
ProbeVerdict judge_probes(const std::vector<net::Reach>& probes);

// scontrol's Reason for the node: "slurm-dl: job 4711: batch host lost the job's ranks
// and its slurmd (127.0.0.1:6818) refused n2 3 times".
std::string batch_host_down_reason(std::uint32_t job, const NodeLine& node, std::string_view from,
                                   int tries);

}  // namespace dl
