// Which node to drain after repeated failures (issue 13, "hang watchdog"): the policy a
// controller plugin applies, pure. A job's dlrun can name the node it blames for a hang
// or a failure, but that is the user's word: the user controls the program and could
// name any node. So a claim counts only as far as slurmctld's own records bear it out
// (`verify_claim`): the node was allocated to that run of the job and slurmctld saw
// something go wrong there (a step of the run ended abnormally on it, or the node stopped
// responding). A node is drained when the same verified node caused the last two
// failures of a job, with a reason that names the job and the evidence and carries no
// text of the user's (`drain_reason`).
#pragma once

#include <cstdint>
#include <ctime>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dl::sched {

// What a job says: its run (its Slurm restart count) failed because of `node`.
struct CulpritClaim {
  std::uint32_t job_id = 0;
  std::uint32_t run = 0;  // the job's restart count when it failed
  std::string node;
  bool hang = false;  // a hang (dlrun's watchdog) rather than a failure
};

// What slurmctld's records say about one run of a job.
struct RunRecord {
  std::uint32_t job_id = 0;
  std::uint32_t run = 0;
  std::vector<std::string> nodes;           // allocated to the run
  std::vector<std::string> failed_on;       // nodes where a step of the run ended abnormally
  std::vector<std::string> not_responding;  // nodes slurmctld marked not responding or DOWN
};

// A failure the controller can vouch for.
struct VerifiedFailure {
  std::uint32_t job_id = 0;
  std::uint32_t run = 0;
  std::string node;
  bool hang = false;
  std::string evidence;  // slurmctld's own, e.g. "a step of run 2 ended abnormally on n3"
};

// Whether a node name is one Slurm could have given (letters, digits, '-', '_', '.';
// at most 64 characters): anything else in a claim is rejected before it is compared.
bool valid_node_name(std::string_view name);

// The claim checked against slurmctld's record of the same run; nullopt when the record
// does not bear it out (another job or run, a node outside the run's allocation, or no
// abnormal end and no silence of the node in slurmctld's records).
std::optional<VerifiedFailure> verify_claim(const CulpritClaim& claim, const RunRecord& record);

// "slurm-dl: job J: <evidence of the older>; <evidence of the newer> (hang|failure)":
// only numbers and the node name, checked by valid_node_name, come from the claims.
std::string drain_reason(const VerifiedFailure& older, const VerifiedFailure& newer);

struct DrainOrder {
  std::string node;
  std::string reason;
};

// The verified failures of each job, the last two kept. A job's failures are recorded
// once per run (a second claim about the same run replaces the first).
class CulpritHistory {
 public:
  // Records `f`; returns the node to drain when `f` and the job's failure before it
  // name the same node (each pair of failures drains at most once).
  std::optional<DrainOrder> record(const VerifiedFailure& f);
  // Forgets a job that has ended.
  void forget(std::uint32_t job_id);
  std::size_t jobs() const { return last_.size(); }

 private:
  struct Last {
    std::optional<VerifiedFailure> older;
    VerifiedFailure newer;
    bool drained = false;
  };
  std::map<std::uint32_t, Last> last_;
};

}  // namespace dl::sched
