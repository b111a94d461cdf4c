#include "ckpt/manifest.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "ckpt/names.h"
#include "ckpt/reshard.h"
#include "core/error.h"

namespace dl::ckpt {
namespace {

using nlohmann::json;

// nlohmann's dump() recurses, so a deeply nested document (a corrupt manifest, or a
// user's metadata) must be refused before it is ever serialized again.
constexpr int kMaxJsonDepth = 64;

struct TooDeep {};

// json::parse, throwing TooDeep as soon as a container opens deeper than kMaxJsonDepth.
json parse_bounded(std::string_view text) {
  return json::parse(text, [](int depth, json::parse_event_t event, json&) {
    // `depth`: the containers around this one.
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth) {
      throw TooDeep{};
    }
    return true;
  });
}

// Where a value is in the document, for error messages: "tensors[3].pieces[0].offset".
class Cursor {
 public:
  Cursor(const json& value, std::string path, std::string_view file)
      : value_(value), path_(std::move(path)), file_(file) {}

  [[noreturn]] void fail(std::string_view what) const {
    if (path_.empty()) throw CorruptError(fmt::format("{}: {}", file_, what));
    throw CorruptError(fmt::format("{}: {}: {}", file_, path_, what));
  }

  const json& value() const { return value_; }

  Cursor field(const char* key) const {
    if (!value_.is_object()) fail("expected an object");
    auto it = value_.find(key);
    const std::string sub = path_.empty() ? key : path_ + "." + key;
    if (it == value_.end()) Cursor(value_, sub, file_).fail("missing");
    return Cursor(*it, sub, file_);
  }

  bool has(const char* key) const { return value_.is_object() && value_.contains(key); }

  Cursor at(std::size_t i) const {
    return Cursor(value_.at(i), fmt::format("{}[{}]", path_, i), file_);
  }

  std::size_t array_size() const {
    if (!value_.is_array()) fail("expected an array");
    return value_.size();
  }

  std::uint64_t uint(std::uint64_t max = UINT64_MAX) const {
    if (!value_.is_number_unsigned() || value_.get<std::uint64_t>() > max) {
      fail(fmt::format("expected a whole number from 0 to {}", max));
    }
    return value_.get<std::uint64_t>();
  }

  std::int64_t int64() const {
    if (!value_.is_number_integer()) fail("expected a whole number");
    return value_.get<std::int64_t>();
  }

  std::string string() const {
    if (!value_.is_string()) fail("expected a string");
    return value_.get<std::string>();
  }

  std::uint64_t hex() const {
    const auto v = parse_hex64(string());
    if (!v) fail("expected 16 lowercase hexadecimal digits");
    return *v;
  }

  Shape shape() const {
    const std::size_t n = array_size();
    if (n > kMaxDims) fail(fmt::format("more than {} dimensions", kMaxDims));
    Shape s;
    for (std::size_t i = 0; i < n; ++i) s.push_back(at(i).uint());
    return s;
  }

 private:
  const json& value_;
  std::string path_;
  std::string_view file_;
};

std::string compact_object(const Cursor& c) {
  if (!c.value().is_object()) c.fail("expected a JSON object");
  return c.value().dump();
}

std::optional<std::uint64_t> optional_offset(const Cursor& c) {
  if (!c.has("file_offset") || c.field("file_offset").value().is_null()) return std::nullopt;
  return c.field("file_offset").uint();
}

json offset_json(const std::optional<std::uint64_t>& offset) {
  return offset ? json(*offset) : json(nullptr);
}

[[noreturn]] void fail(std::string_view file, std::string_view where, std::string_view what) {
  throw CorruptError(fmt::format("{}: {}: {}", file, where, what));
}

std::string shape_str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

bool is_job_id(std::string_view s) {
  return !s.empty() && s.size() <= 20 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool is_user_name(std::string_view s) {
  return s.size() <= 256 && std::all_of(s.begin(), s.end(), [](char c) {
           const auto u = static_cast<unsigned char>(c);
           return u > 0x20 && u != 0x7f;
         });
}

// What a manifest's "writer" must be; the same rules for the parser and the writer.
std::string writer_problem(const Writer& w) {
  if (!w.job_id.empty() && !is_job_id(w.job_id)) return "job_id: expected decimal digits";
  if (w.array_job_id.empty() != w.array_task_id.empty()) {
    return "array_job_id and array_task_id go together";
  }
  if (!w.array_job_id.empty() && (!is_job_id(w.array_job_id) || !is_job_id(w.array_task_id))) {
    return "array_job_id, array_task_id: expected decimal digits";
  }
  if (!is_user_name(w.user)) return "user: expected at most 256 printable characters";
  return "";
}

Writer parse_writer(const Cursor& c) {
  if (!c.value().is_object()) c.fail("expected an object");
  Writer w;
  w.job_id = c.field("job_id").string();
  if (c.has("array_job_id")) w.array_job_id = c.field("array_job_id").string();
  if (c.has("array_task_id")) w.array_task_id = c.field("array_task_id").string();
  w.user = c.field("user").string();
  w.uid = static_cast<std::uint32_t>(c.field("uid").uint(UINT32_MAX));
  if (const std::string problem = writer_problem(w); !problem.empty()) c.fail(problem);
  return w;
}

}  // namespace

Writer writer_from_env(const std::function<const char*(const char*)>& env, std::uint32_t uid,
                       std::string user) {
  const auto id = [&](const char* name) {
    const char* v = env(name);
    return v != nullptr && is_job_id(v) ? std::string(v) : std::string();
  };
  Writer w;
  w.job_id = id("SLURM_JOB_ID");
  w.array_job_id = id("SLURM_ARRAY_JOB_ID");
  w.array_task_id = id("SLURM_ARRAY_TASK_ID");
  if (w.array_job_id.empty() || w.array_task_id.empty()) w.array_job_id = w.array_task_id = "";
  w.user = is_user_name(user) ? std::move(user) : "";
  w.uid = uid;
  return w;
}

std::string describe_writer(const std::optional<Writer>& w) {
  if (!w) return "an unknown job";
  const std::string who =
      fmt::format("user {}, uid {}", w->user.empty() ? std::string("?") : w->user, w->uid);
  if (!w->array_job_id.empty()) return fmt::format("array task {} ({})", w->job_key(), who);
  if (!w->job_id.empty()) return fmt::format("job {} ({})", w->job_id, who);
  return fmt::format("a process outside Slurm ({})", who);
}

std::uint64_t element_count(const Shape& shape) {
  std::uint64_t n = 1;
  for (std::uint64_t d : shape) {
    if (d != 0 && n > UINT64_MAX / d) {
      throw CorruptError(fmt::format("shape {} overflows", shape_str(shape)));
    }
    n *= d;
  }
  return n;
}

std::uint64_t piece_bytes(const TensorEntry& t, const Piece& p) {
  const std::uint64_t n = element_count(p.slice.shape);
  const std::uint64_t size = dtype_size(t.dtype);
  if (n > UINT64_MAX / size) throw CorruptError(fmt::format("tensor {} overflows", t.name));
  return n * size;
}

std::string metrics_json(const std::map<std::string, double>& metrics) {
  json doc = json::object();
  for (const auto& [name, value] : metrics) doc[name] = value;
  return doc.dump();
}

std::string compact_json_object(std::string_view text, std::string_view what) {
  json doc;
  try {
    doc = parse_bounded(text);
  } catch (const TooDeep&) {
    throw InputError(fmt::format("{}: JSON nested deeper than {} levels", what, kMaxJsonDepth));
  } catch (const json::parse_error& e) {
    throw InputError(fmt::format("{}: not valid JSON (byte {})", what, e.byte));
  }
  if (!doc.is_object()) throw InputError(fmt::format("{}: expected a JSON object", what));
  return doc.dump();
}

std::string hex64(std::uint64_t v) { return fmt::format("{:016x}", v); }

std::optional<std::uint64_t> parse_hex64(std::string_view s) {
  if (s.size() != 16) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      return std::nullopt;
    }
    v = (v << 4) | static_cast<std::uint64_t>(d);
  }
  return v;
}

std::string manifest_to_json(const Manifest& m) {
  json doc = json::object();
  doc["format"] = kFormatName;
  doc["format_version"] = m.format_version;
  doc["step"] = m.step;
  doc["epoch"] = m.epoch;
  doc["data_loader_position"] = m.data_loader_position;
  doc["world_size"] = m.world_size;
  doc["created"] = format_utc(m.created_unix);
  doc["created_unix"] = m.created_unix;
  doc["host"] = m.host;
  doc["hyperparameters"] = json::parse(m.hyperparameters);
  doc["user_metadata"] = json::parse(m.user_metadata);
  doc["metrics"] = json::object();
  for (const auto& [name, value] : m.metrics) doc["metrics"][name] = value;
  if (m.writer) {
    json w = {{"job_id", m.writer->job_id}, {"user", m.writer->user}, {"uid", m.writer->uid}};
    if (!m.writer->array_job_id.empty()) {
      w["array_job_id"] = m.writer->array_job_id;
      w["array_task_id"] = m.writer->array_task_id;
    }
    doc["writer"] = w;
  }
  doc["shards"] = json::array();
  for (const ShardEntry& s : m.shards) {
    json rng = json::array();
    for (const BlobEntry& b : s.rng) {
      rng.push_back({{"name", b.name},
                     {"bytes", b.bytes},
                     {"file_offset", offset_json(b.file_offset)},
                     {"xxh3", hex64(b.xxh3)}});
    }
    doc["shards"].push_back({{"rank", s.rank},
                             {"file", s.file},
                             {"bytes", s.bytes},
                             {"metadata_xxh3", hex64(s.metadata_xxh3)},
                             {"host", s.host},
                             {"rng", rng}});
  }
  doc["tensors"] = json::array();
  for (const TensorEntry& t : m.tensors) {
    json pieces = json::array();
    for (const Piece& p : t.pieces) {
      pieces.push_back({{"rank", p.rank},
                        {"offset", p.slice.offset},
                        {"shape", p.slice.shape},
                        {"file_offset", offset_json(p.file_offset)},
                        {"xxh3", hex64(p.xxh3)}});
    }
    doc["tensors"].push_back(
        {{"name", t.name}, {"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"pieces", pieces}});
  }
  return doc.dump(1) + "\n";
}

namespace {

Manifest parse_manifest(std::string_view text, std::string_view path, bool fragment) {
  json doc;
  try {
    doc = parse_bounded(text);
  } catch (const TooDeep&) {
    throw CorruptError(fmt::format("{}: JSON nested deeper than {} levels", path, kMaxJsonDepth));
  } catch (const json::parse_error& e) {
    throw CorruptError(fmt::format("{}: not valid JSON (byte {})", path, e.byte));
  }
  const Cursor root(doc, "", path);
  if (!doc.is_object()) root.fail("expected a JSON object");
  if (root.field("format").string() != kFormatName) {
    root.field("format").fail(fmt::format("expected \"{}\"", kFormatName));
  }
  Manifest m;
  const std::uint64_t version = root.field("format_version").uint();
  if (version != static_cast<std::uint64_t>(kFormatVersion)) {
    root.fail(fmt::format("format version {} is not supported (this library reads version {})",
                          version, kFormatVersion));
  }
  m.step = root.field("step").uint();
  m.epoch = root.field("epoch").uint();
  m.data_loader_position = root.field("data_loader_position").uint();
  m.world_size = static_cast<unsigned>(root.field("world_size").uint(kMaxWorldSize));
  m.created_unix = root.field("created_unix").int64();
  m.host = root.field("host").string();
  m.hyperparameters = compact_object(root.field("hyperparameters"));
  m.user_metadata = compact_object(root.field("user_metadata"));
  const Cursor metrics = root.field("metrics");
  if (!metrics.value().is_object()) metrics.fail("expected an object of numbers");
  for (const auto& [name, value] : metrics.value().items()) {
    if (!value.is_number()) metrics.fail(fmt::format("{:?} is not a number", name));
    m.metrics[name] = value.get<double>();
  }
  if (root.has("writer")) m.writer = parse_writer(root.field("writer"));

  const Cursor shards = root.field("shards");
  for (std::size_t i = 0; i < shards.array_size(); ++i) {
    const Cursor c = shards.at(i);
    ShardEntry s;
    s.rank = static_cast<unsigned>(c.field("rank").uint(kMaxWorldSize));
    s.file = c.field("file").string();
    s.bytes = c.field("bytes").uint();
    s.metadata_xxh3 = c.field("metadata_xxh3").hex();
    s.host = c.field("host").string();
    const Cursor rng = c.field("rng");
    for (std::size_t j = 0; j < rng.array_size(); ++j) {
      const Cursor b = rng.at(j);
      s.rng.push_back(BlobEntry{b.field("name").string(), b.field("bytes").uint(),
                                optional_offset(b), b.field("xxh3").hex()});
    }
    m.shards.push_back(std::move(s));
  }

  const Cursor tensors = root.field("tensors");
  for (std::size_t i = 0; i < tensors.array_size(); ++i) {
    const Cursor c = tensors.at(i);
    TensorEntry t;
    t.name = c.field("name").string();
    const auto dtype = parse_dtype(c.field("dtype").string());
    if (!dtype) c.field("dtype").fail("expected one of f16, bf16, f32, f64, i32, i64, u8");
    t.dtype = *dtype;
    t.shape = c.field("shape").shape();
    const Cursor pieces = c.field("pieces");
    for (std::size_t j = 0; j < pieces.array_size(); ++j) {
      const Cursor p = pieces.at(j);
      t.pieces.push_back(Piece{static_cast<unsigned>(p.field("rank").uint(kMaxWorldSize)),
                               Slice{p.field("offset").shape(), p.field("shape").shape()},
                               optional_offset(p), p.field("xxh3").hex()});
    }
    m.tensors.push_back(std::move(t));
  }
  validate_manifest(m, path, fragment);
  return m;
}

}  // namespace

Manifest manifest_from_json(std::string_view text, std::string_view path, bool fragment) {
  try {
    return parse_manifest(text, path, fragment);
  } catch (const json::exception& e) {
    // The checks above leave nothing for nlohmann to object to; this is a safety net
    // that keeps its exception types out of the library's interface.
    throw CorruptError(fmt::format("{}: {}", path, e.what()));
  }
}

void validate_manifest(const Manifest& m, std::string_view path, bool fragment) {
  if (m.world_size < 1 || m.world_size > kMaxWorldSize) {
    fail(path, "world_size", fmt::format("expected 1 to {}", kMaxWorldSize));
  }
  for (const auto& [name, value] : m.metrics) {
    if (!std::isfinite(value)) fail(path, "metrics", fmt::format("{:?} is not finite", name));
  }
  if (m.writer) {
    if (const std::string problem = writer_problem(*m.writer); !problem.empty()) {
      fail(path, "writer", problem);
    }
  }
  for (const std::string* object : {&m.hyperparameters, &m.user_metadata}) {
    try {
      parse_bounded(*object);
    } catch (const TooDeep&) {
      fail(path, "metadata", fmt::format("JSON nested deeper than {} levels", kMaxJsonDepth));
    } catch (const json::parse_error& e) {
      fail(path, "metadata", fmt::format("not valid JSON (byte {})", e.byte));
    }
  }
  if (fragment ? m.shards.size() != 1 : m.shards.size() != m.world_size) {
    fail(path, "shards",
         fragment ? std::string("a fragment holds exactly one shard")
                  : fmt::format("expected {} shards (the world size), found {}", m.world_size,
                                m.shards.size()));
  }

  std::map<unsigned, const ShardEntry*> by_rank;
  std::map<unsigned, std::vector<ByteRange>> ranges;
  for (std::size_t i = 0; i < m.shards.size(); ++i) {
    const ShardEntry& s = m.shards[i];
    const std::string where = fmt::format("shards[{}]", i);
    if (s.rank >= m.world_size) {
      fail(path, where,
           fmt::format("rank {} is not below the world size {}", s.rank, m.world_size));
    }
    if (!by_rank.emplace(s.rank, &s).second) {
      fail(path, where, fmt::format("rank {} appears twice", s.rank));
    }
    if (!fragment && s.rank != i) fail(path, where, "shards must be listed in rank order");
    if (s.file != shard_file_name(s.rank, m.world_size)) {
      fail(path, where,
           fmt::format("file {:?} should be {:?}", s.file, shard_file_name(s.rank, m.world_size)));
    }
    std::set<std::string> names;
    for (const BlobEntry& b : s.rng) {
      if (!is_valid_rng_name(b.name)) {
        fail(path, where, fmt::format("invalid RNG state name {:?}", b.name));
      }
      if (!names.insert(b.name).second) {
        fail(path, where, fmt::format("RNG state {:?} appears twice", b.name));
      }
      if ((b.bytes == 0) != !b.file_offset) {
        fail(path, where,
             fmt::format("RNG state {:?}: file_offset must be set exactly when it has bytes",
                         b.name));
      }
      if (b.file_offset) ranges[s.rank].push_back({*b.file_offset, b.bytes});
    }
  }

  std::string previous;
  for (std::size_t i = 0; i < m.tensors.size(); ++i) {
    const TensorEntry& t = m.tensors[i];
    const std::string where = fmt::format("tensors[{}]", i);
    if (!is_valid_tensor_name(t.name)) {
      fail(path, where, fmt::format("invalid tensor name {:?}", t.name));
    }
    if (i > 0 && t.name <= previous) fail(path, where, "tensors must be sorted by name, each once");
    previous = t.name;
    if (t.shape.size() > kMaxDims) fail(path, where, "too many dimensions");
    element_count(t.shape);
    if (t.pieces.empty()) fail(path, where, "has no pieces");
    std::set<unsigned> ranks;
    for (std::size_t j = 0; j < t.pieces.size(); ++j) {
      const Piece& p = t.pieces[j];
      const std::string pwhere = fmt::format("{}.pieces[{}]", where, j);
      if (!by_rank.count(p.rank)) fail(path, pwhere, fmt::format("rank {} has no shard", p.rank));
      if (!ranks.insert(p.rank).second) {
        fail(path, pwhere, fmt::format("rank {} holds two pieces", p.rank));
      }
      if (p.slice.offset.size() != t.shape.size() || p.slice.shape.size() != t.shape.size()) {
        fail(path, pwhere, fmt::format("offset and shape must have {} dimensions", t.shape.size()));
      }
      for (std::size_t d = 0; d < t.shape.size(); ++d) {
        if (p.slice.offset[d] > t.shape[d] || p.slice.shape[d] > t.shape[d] - p.slice.offset[d]) {
          fail(path, pwhere,
               fmt::format("box {}+{} exceeds the shape {}", shape_str(p.slice.offset),
                           shape_str(p.slice.shape), shape_str(t.shape)));
        }
      }
      const std::uint64_t bytes = piece_bytes(t, p);
      if ((bytes == 0) != !p.file_offset) {
        fail(path, pwhere, "file_offset must be set exactly when the piece has bytes");
      }
      if (p.file_offset) ranges[p.rank].push_back({*p.file_offset, bytes});
    }
    if (!fragment) {
      std::vector<Slice> boxes;
      for (const Piece& p : t.pieces) boxes.push_back(p.slice);
      if (std::string problem = tiling_problem(t.shape, boxes); !problem.empty()) {
        fail(path, where, fmt::format("tensor {}: {}", t.name, problem));
      }
    }
  }

  for (auto& [rank, list] : ranges) {
    const ShardEntry& s = *by_rank.at(rank);
    std::sort(list.begin(), list.end(),
              [](const ByteRange& a, const ByteRange& b) { return a.offset < b.offset; });
    std::uint64_t end = 0;
    for (const ByteRange& r : list) {
      if (r.offset < end) fail(path, s.file, "two data ranges overlap");
      if (r.offset > s.bytes || r.size > s.bytes - r.offset) {
        fail(path, s.file,
             fmt::format("data range {}+{} lies beyond the file size {}", r.offset, r.size,
                         s.bytes));
      }
      end = r.offset + r.size;
    }
  }
}

Manifest merge_fragments(std::vector<Manifest> fragments, std::string_view path) {
  if (fragments.empty()) throw CorruptError(fmt::format("{}: no fragments", path));
  std::sort(fragments.begin(), fragments.end(), [](const Manifest& a, const Manifest& b) {
    return a.shards.at(0).rank < b.shards.at(0).rank;
  });
  Manifest m = fragments.front();
  m.shards.clear();
  m.tensors.clear();
  std::map<std::string, TensorEntry> tensors;
  for (const Manifest& f : fragments) {
    const unsigned rank = f.shards.at(0).rank;
    if (f.step != m.step || f.world_size != m.world_size) {
      throw CorruptError(fmt::format(
          "{}: rank {} saved step {} of world size {}, rank {} step {} of world size {}", path,
          rank, f.step, f.world_size, fragments.front().shards.at(0).rank, m.step, m.world_size));
    }
    m.shards.push_back(f.shards.at(0));
    for (const TensorEntry& t : f.tensors) {
      auto [it, fresh] = tensors.emplace(t.name, t);
      if (fresh) continue;
      if (it->second.dtype != t.dtype || it->second.shape != t.shape) {
        throw CorruptError(fmt::format("{}: tensor {} is {} {} on rank {} but {} {} on rank {}",
                                       path, t.name, dtype_name(t.dtype), shape_str(t.shape), rank,
                                       dtype_name(it->second.dtype), shape_str(it->second.shape),
                                       it->second.pieces.front().rank));
      }
      it->second.pieces.insert(it->second.pieces.end(), t.pieces.begin(), t.pieces.end());
    }
  }
  for (auto& [name, t] : tensors) m.tensors.push_back(std::move(t));
  validate_manifest(m, path, false);
  return m;
}

std::vector<ByteRange> data_ranges(const Manifest& m, unsigned rank) {
  std::vector<ByteRange> out;
  for (const ShardEntry& s : m.shards) {
    if (s.rank != rank) continue;
    for (const BlobEntry& b : s.rng) {
      if (b.file_offset) out.push_back({*b.file_offset, b.bytes});
    }
  }
  for (const TensorEntry& t : m.tensors) {
    for (const Piece& p : t.pieces) {
      if (p.rank == rank && p.file_offset) out.push_back({*p.file_offset, piece_bytes(t, p)});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const ByteRange& a, const ByteRange& b) { return a.offset < b.offset; });
  return out;
}

std::vector<ByteRange> gaps(const std::vector<ByteRange>& ranges, std::uint64_t file_size) {
  std::vector<ByteRange> out;
  std::uint64_t pos = 0;
  for (const ByteRange& r : ranges) {
    if (r.offset > pos) out.push_back({pos, r.offset - pos});
    pos = std::max(pos, r.offset + r.size);
  }
  if (file_size > pos) out.push_back({pos, file_size - pos});
  return out;
}

const TensorEntry* find_tensor(const Manifest& m, std::string_view name) {
  auto it = std::lower_bound(m.tensors.begin(), m.tensors.end(), name,
                             [](const TensorEntry& t, std::string_view n) { return t.name < n; });
  return it != m.tensors.end() && it->name == name ? &*it : nullptr;
}

std::uint64_t total_bytes(const Manifest& m) {
  std::uint64_t n = 0;
  for (const ShardEntry& s : m.shards) n += s.bytes;
  return n;
}

}  // namespace dl::ckpt
