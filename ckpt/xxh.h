// XXH3-64 (libxxhash), streaming: the checksum of every dataset and of each shard's
// metadata bytes.
#pragma once

#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace dl::ckpt {

class Xxh3 {
 public:
  Xxh3();
  void update(const void* data, std::size_t n);
  std::uint64_t digest() const { return XXH3_64bits_digest(state_.get()); }

 private:
  struct Free {
    void operator()(XXH3_state_t* s) const noexcept { XXH3_freeState(s); }
  };
  std::unique_ptr<XXH3_state_t, Free> state_;
};

}  // namespace dl::ckpt
