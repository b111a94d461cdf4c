// What the two checkpoint fuzzers share: the input's format (records of a 4-byte
// little-endian length and that many bytes: manifest.json, then the shards of ranks 0,
// 1, ...), the checkpoint directory it becomes, and the run of one input.
#pragma once

#include <fcntl.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "ckpt/names.h"
#include "core/error.h"
#include "core/log.h"
#include "core/sysio.h"
#include "dl/ckpt.h"

namespace dl::fuzz {

using Bytes = std::vector<std::uint8_t>;

// The checkpoint root every input is unpacked into: a fresh directory in /dev/shm, removed
// with its contents when the fuzzer exits.
inline std::string& root() {
  static std::string path;
  return path;
}

// At most five records: a manifest and four shards.
inline std::vector<Bytes> split_records(const std::uint8_t* data, std::size_t size) {
  std::vector<Bytes> records;
  while (size > 0 && records.size() < 5) {
    std::uint32_t n = 0;
    for (int i = 0; i < 4 && size > 0; ++i, ++data, --size) n |= std::uint32_t{*data} << (8 * i);
    const std::size_t len = std::min<std::size_t>(n, size);
    records.emplace_back(data, data + len);
    data += len;
    size -= len;
  }
  return records;
}

// The step directory ROOT/step-000000001.
inline std::string step_dir() { return dl::sys::join(root(), "step-000000001"); }

// Replaces the step directory with RECORDS: the manifest (none when RECORDS is empty),
// then the shards, named for a world size of their number.
inline void write_step(const std::vector<Bytes>& records) {
  const std::string step = step_dir();
  dl::sys::remove_tree(step);
  dl::sys::make_dir(step);
  const unsigned world = records.size() > 1 ? static_cast<unsigned>(records.size() - 1) : 1;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const std::string name = i == 0
                                 ? std::string(dl::ckpt::kManifestName)
                                 : dl::ckpt::shard_file_name(static_cast<unsigned>(i - 1), world);
    dl::sys::Fd fd = dl::sys::open_file(dl::sys::join(step, name), O_WRONLY | O_CREAT | O_TRUNC);
    dl::sys::write_all_at(fd, records[i].data(), records[i].size(), 0);
    fd.close();
  }
}

// LLVMFuzzerInitialize's part: the root from TEMPLATE (mkdtemp), no log output (the
// reader warns once per bad input).
inline int initialize(std::string templ) {
  if (::mkdtemp(templ.data()) == nullptr) std::abort();
  root() = templ;
  std::atexit([] { dl::sys::remove_tree(root()); });
  dl::set_log_sink([](dl::LogLevel, std::string_view) {});
  return 0;
}

// LLVMFuzzerTestOneInput's part: a bad checkpoint may only raise these two errors.
template <typename Unpack, typename Exercise>
int run_input(const std::uint8_t* data, std::size_t size, Unpack unpack, Exercise exercise) {
  unpack(data, size);
  try {
    exercise();
  } catch (const dl::ckpt::CorruptError&) {
  } catch (const dl::SystemError&) {
  }
  return 0;
}

}  // namespace dl::fuzz
