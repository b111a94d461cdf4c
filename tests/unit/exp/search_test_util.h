// What search_test's files share: a small ASHA search (one log-scale learning rate, seed
// 7, rungs of 2, 4 and 8 steps) in a temporary root.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "exp/search_config.h"

namespace dl::exp::search {

inline Experiment small_asha(const std::string& name, const std::string& root) {
  Experiment e;
  e.name = name;
  e.root = root;
  e.command = "true";
  e.searcher.algorithm = Algorithm::asha;
  e.searcher.space = {{"lr", ParamKind::log_real, 1e-4, 1.0, {}, 3}};
  e.searcher.seed = 7;
  e.searcher.max_rungs = 3;
  e.searcher.budget = 8;  // rungs 2, 4, 8
  return e;
}

// A new directory under /tmp for a test's roots (the test removes it).
inline std::string temp_root() {
  char dir[] = "/tmp/dl-search-test.XXXXXX";
  EXPECT_NE(::mkdtemp(dir), nullptr);
  return dir;
}

}  // namespace dl::exp::search
