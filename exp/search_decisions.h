// The driver's side of in-job continuation (docs/design/search.md): the decision files a
// trial waits on after its rung, in the experiment's continue/ directory, named and
// written as client/decision_file.h says.
#pragma once

#include <string>

namespace dl::exp::search {

// <dir>/<trial>.<job>.r<rung>: the decision for `trial` in Slurm job `job` after `rung`.
std::string decision_path(const std::string& dir, const std::string& trial, const std::string& job,
                          int rung);

// Whether the trial of decision `path` waits for it (its .wait file is there) and none
// is taken yet.
bool waits_for_decision(const std::string& path);

// Creates the decision file `path` with `text` unless it exists (link(2): atomic, so the
// driver's "continue" and a trial's own "end" never both hold); returns the decision that
// holds.
std::string decide(const std::string& path, const std::string& text);

}  // namespace dl::exp::search
