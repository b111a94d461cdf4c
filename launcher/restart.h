// The restart guard: after a run of the job ends, whether to requeue it, hold it or let
// it end. Rank 0's dlrun decides; the history travels between runs of the same job in a
// small file (see launcher/restart_state).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dl {

// How a run ended, as rank 0's dlrun saw it.
enum class RunEnd {
  completed,  // every rank's program exited 0
  stopped,    // preempted, at its deadline or told to stop: checkpointed, to be requeued
  failed,     // a rank's program failed, or a rank was lost
};

struct RestartPolicy {
  std::uint32_t max_restarts = 3;          // restarts after failures (--dl-max-restarts)
  std::uint32_t max_stalled_restarts = 2;  // restarts in a row without a newer checkpoint
};

// What made a run fail, as dlrun saw it: the first rank whose program failed, the rank
// the hang watchdog declared hung, or a rank whose dlrun was lost; and its node.
enum class CulpritKind { failed, hung, lost };

struct Culprit {
  std::string node;  // empty: not known (e.g. the step could not start)
  std::uint32_t rank = 0;
  CulpritKind kind = CulpritKind::failed;

  bool operator==(const Culprit& o) const {
    return node == o.node && rank == o.rank && kind == o.kind;
  }
};

// "rank 1 on n2 hung", "rank 0 on n1 failed", "rank 3 on n2 was lost".
std::string describe_culprit(const Culprit& c);

// A host name as Slurm gives it: 1 to 255 letters, digits, '-', '_' and '.'.
bool valid_node_name(std::string_view node);

// "n2/1/hung" ("-" for an unknown culprit) and back; nullopt for anything else.
std::string encode_culprit(const Culprit& c);
std::optional<Culprit> decode_culprit(std::string_view text);

// How many failed runs in a row with the same culprit node exclude that node.
inline constexpr std::size_t kCulpritRepeats = 2;

struct RestartHistory {
  std::uint32_t failures = 0;  // failed runs so far
  std::uint32_t stalled = 0;   // runs in a row that ended without a newer checkpoint
  // The newest checkpoint step the job had when a run last ended: a later run that
  // finds none knows it lost it (e.g. a checkpoint root that is not shared).
  std::optional<std::int64_t> ckpt;
  // The culprits of the job's last failed runs (at most kCulpritRepeats - 1 are kept
  // between runs), oldest first.
  std::vector<Culprit> culprits{};
};

// "failures=1 stalled=0 ckpt=1200 culprits=n2/1/hung\n" (ckpt and culprits only when
// known; an unknown culprit is "-") and back; the forms without them written by older
// versions still decode. Throws dl::InputError on anything else.
std::string encode_history(const RestartHistory& h);
RestartHistory decode_history(std::string_view text);

// After a failed run whose culprit is `now` (nullopt: not known), given the culprits of
// the failed runs before it (`recent`, oldest first): when the same node caused the
// last kCulpritRepeats failures, that node is excluded from the job and the record
// starts afresh; otherwise the record keeps the newest culprits.
struct CulpritVerdict {
  std::vector<Culprit> recent;         // to keep for the next failure
  std::optional<std::string> exclude;  // the node to take out of the job
  // "node n2 caused the last two failures (rank 1 on n2 hung; rank 1 on n2 failed);
  // excluded"; empty without an exclusion.
  std::string why;
};
CulpritVerdict judge_culprit(const std::vector<Culprit>& recent, const std::optional<Culprit>& now);

enum class RestartAction {
  finish,   // completed: nothing to do
  requeue,  // requeue the job (this array task only)
  hold,     // requeue it held: no restarts left, or it keeps stopping without progress
};

struct RestartDecision {
  RestartAction action = RestartAction::finish;
  RestartHistory history;  // what the next run starts from
  std::string reason;      // one line for the log and the job comment
};

// `ckpt_before`: the newest checkpoint's step when the run started; `ckpt_after`: now
// (nullopt: none). A run made progress when it left a newer checkpoint. A job is held
// when a failure is beyond `max_restarts`, or when its last `max_stalled_restarts`
// restarts, and the run before them, made none.
RestartDecision decide_restart(const RestartPolicy& policy, const RestartHistory& history,
                               RunEnd end, std::optional<std::int64_t> ckpt_before,
                               std::optional<std::int64_t> ckpt_after);

// Which job wrote a checkpoint that a run could resume.
struct ResumeCandidate {
  std::string path;  // its step directory
  std::int64_t step = -1;
  std::string writer_job;  // "4711" or "100_3"; empty when the manifest does not say
  std::string writer;      // "job 4711 (user alice, uid 1000)", for messages
};

// Where the job's checkpoint directory came from: the site's default (unique per job:
// only the job's own checkpoints may be resumed), or the user's --dl-ckpt-dir (shared
// on purpose: any writer is accepted).
enum class CkptDirKind { site_default, chosen };

// Why `own_job` must not resume `c` found in its own checkpoint directory, or empty
// when it may. In a site-default directory a checkpoint written by another job, or by
// an unknown one, is refused; --dl-resume-from is the explicit way to continue another
// job's run.
std::string resume_refusal(const ResumeCandidate& c, CkptDirKind kind, const std::string& own_job,
                           const std::string& dir);

// "resuming step 1200 from DIR/step-000001200, written by job 4711 (user alice, uid 1000)".
std::string resume_message(const ResumeCandidate& c);

// What to say when the job's records (`recorded`, see restart_state.h) have a newer
// checkpoint than the run resumes: `own_newest` is the newest this job may resume in its
// directory `dir`, `resumed` the step the run resumes (--dl-resume-from included).
// Empty when nothing is missing.
std::string missing_checkpoint_warning(std::optional<std::int64_t> recorded, const std::string& job,
                                       const std::string& dir,
                                       std::optional<std::int64_t> own_newest,
                                       std::optional<std::int64_t> resumed);

}  // namespace dl
