// Draining a node that failed a job's runs twice (issue 13): what spank_dl.so records, in
// slurmstepd as root, about the steps of one --dl-* job on one node, and when it drains
// the node. Pure; the plugin's adapter (spank/slurmstepd.cc) reads and writes the record
// and runs scontrol.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dl {

// The exit status of a step's dlrun whose rank caused the step's failure, under the
// job-level launcher and when the plugin asks for it (DL_CULPRIT_EXIT in the task's
// environment): the culprit rank's dlrun exits with it instead of 76 (kExitRestartStep).
inline constexpr int kExitCulpritStep = 77;

// One job's steps on one node that ended with this node as the culprit, in a row.
struct NodeRecord {
  std::vector<std::uint32_t> culprit_steps;  // their step ids, oldest first
  bool drained = false;                      // the plugin drained the node for this job
};

// "culprit_steps=3,4 drained=0\n" and back; throws dl::InputError on anything else.
std::string encode_node_record(const NodeRecord& r);
NodeRecord decode_node_record(std::string_view text);

struct DrainDecision {
  NodeRecord record;   // to keep
  bool drain = false;  // drain the node now
  // scontrol's Reason, numbers only besides the words: "slurm-dl: job 4711: steps 3,4
  // ended with this node as the culprit (dlrun exit 77)".
  std::string reason;
};

// After step `step` of job `job` (its numeric id) ended on this node, `culprit` when one
// of its tasks exited with kExitCulpritStep: a step that did not resets the record, and
// so does a gap in the step ids (a step that ran elsewhere); the `drain_after`-th culprit
// step in a row (consecutive step ids) drains the node, once per job (0: never).
DrainDecision judge_step(const NodeRecord& record, std::uint32_t job, std::uint32_t step,
                         bool culprit, std::uint32_t drain_after);

// The most of the reply below that is read (stdout and stderr); more is not trusted.
inline constexpr std::size_t kMaxDrainedNodesReply = std::size_t{1} << 20;

// Whether this node may be drained for job `job`, from the exit code and the reply of
// `sinfo -h -N -t drain -o '%N|%E'` (the drained and draining nodes only, "<node>|<reason>"
// a line: small however large the cluster): no if a node was drained for the job already,
// and no if anything is uncertain (a non-zero exit, a reply over kMaxDrainedNodesReply, a
// line of another form); `why_not` says which, for the log.
struct DrainCheck {
  bool may_drain = false;
  std::string why_not;
};
DrainCheck check_drained_nodes(std::uint32_t job, int exit_code, std::string_view reply);

// The name of the record of job `job` on node `node` in the plugin's state directory;
// throws dl::InputError when `node` is not a plain host name.
std::string node_record_name(std::string_view node, std::uint32_t job);

}  // namespace dl
