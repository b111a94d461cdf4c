// The framing of one experiment-journal record (exp/, ARCHITECTURE.md): a line
//   <crc32 of the JSON, 8 lowercase hex digits> <JSON object>\n
// Header-only and dependency-free so that the client library, the exp/ domain and the
// Python client (zlib.crc32) all write the same bytes. A reader keeps a line only when it
// ends in a newline and its checksum matches: a record torn by kill -9 or a full disk is
// detected and ignored, never half-read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace dl::journal {

// CRC-32 (IEEE 802.3, as zlib.crc32).
inline std::uint32_t crc32(std::string_view data) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (const unsigned char c : data) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

inline std::string frame(std::string_view json) {
  char head[10];
  std::snprintf(head, sizeof head, "%08x ", static_cast<unsigned>(crc32(json)));
  std::string line;
  line.reserve(json.size() + 10);
  line.append(head, 9);
  line.append(json);
  line.push_back('\n');
  return line;
}

// The JSON of a framed line (without its newline) when the checksum matches.
inline bool unframe(std::string_view line, std::string_view* json) {
  if (line.size() < 11 || line[8] != ' ') return false;
  std::uint32_t want = 0;
  for (int i = 0; i < 8; ++i) {
    const char c = line[i];
    std::uint32_t v;
    if (c >= '0' && c <= '9') {
      v = static_cast<std::uint32_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      v = static_cast<std::uint32_t>(c - 'a' + 10);
    } else {
      return false;
    }
    want = (want << 4) | v;
  }
  const std::string_view body = line.substr(9);
  if (crc32(body) != want) return false;
  *json = body;
  return true;
}

}  // namespace dl::journal
