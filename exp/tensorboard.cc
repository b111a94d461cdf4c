#include "exp/tensorboard.h"

#include <cstring>

namespace dl::exp::tensorboard {
namespace {

void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_key(std::string& out, int field, int wire_type) {
  put_varint(out, (static_cast<std::uint64_t>(field) << 3) | static_cast<std::uint64_t>(wire_type));
}

void put_fixed(std::string& out, const void* p, std::size_t n) {
  // Protocol buffers and TFRecord are little-endian, as is every host slurm-dl runs on.
  out.append(static_cast<const char*>(p), n);
}

void put_bytes(std::string& out, int field, std::string_view bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out.append(bytes);
}

void put_double(std::string& out, int field, double v) {
  put_key(out, field, 1);
  put_fixed(out, &v, sizeof v);
}

}  // namespace

std::uint32_t crc32c(std::string_view data) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (const unsigned char c : data) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

std::uint32_t masked_crc32c(std::string_view data) {
  const std::uint32_t crc = crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string record(std::string_view data) {
  std::string out;
  const std::uint64_t length = data.size();
  std::string len_bytes(reinterpret_cast<const char*>(&length), sizeof length);
  const std::uint32_t len_crc = masked_crc32c(len_bytes);
  const std::uint32_t data_crc = masked_crc32c(data);
  out += len_bytes;
  put_fixed(out, &len_crc, sizeof len_crc);
  out.append(data);
  put_fixed(out, &data_crc, sizeof data_crc);
  return out;
}

std::string file_version_event(double wall_time) {
  std::string e;
  put_double(e, 1, wall_time);       // Event.wall_time
  put_bytes(e, 3, "brain.Event:2");  // Event.file_version
  return e;
}

std::string scalars_event(double wall_time, std::int64_t step,
                          const std::map<std::string, double>& values) {
  std::string summary;
  for (const auto& [tag, value] : values) {
    std::string v;
    put_bytes(v, 1, tag);  // Summary.Value.tag
    const float f = static_cast<float>(value);
    put_key(v, 2, 5);  // Summary.Value.simple_value (float)
    put_fixed(v, &f, sizeof f);
    put_bytes(summary, 1, v);  // Summary.value
  }
  std::string e;
  put_double(e, 1, wall_time);  // Event.wall_time
  put_key(e, 2, 0);             // Event.step
  put_varint(e, static_cast<std::uint64_t>(step));
  put_bytes(e, 5, summary);  // Event.summary
  return e;
}

}  // namespace dl::exp::tensorboard
