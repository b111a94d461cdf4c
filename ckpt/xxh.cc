#include "ckpt/xxh.h"

#include <new>

namespace dl::ckpt {

Xxh3::Xxh3() : state_(XXH3_createState()) {
  if (!state_ || XXH3_64bits_reset(state_.get()) != XXH_OK) throw std::bad_alloc();
}

void Xxh3::update(const void* data, std::size_t n) { XXH3_64bits_update(state_.get(), data, n); }

}  // namespace dl::ckpt
