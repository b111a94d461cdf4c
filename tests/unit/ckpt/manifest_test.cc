#include "ckpt/manifest.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace dl::ckpt {
namespace {

using nlohmann::json;

// Two ranks, a row-split matrix, a replicated scalar, RNG states and an empty tensor.
Manifest sample() {
  Manifest m;
  m.step = 1200;
  m.epoch = 3;
  m.data_loader_position = 4096;
  m.world_size = 2;
  m.created_unix = 1714564800;
  m.host = "n1";
  m.hyperparameters = R"({"lr":0.001})";
  m.user_metadata = R"({"note":"x"})";
  m.metrics = {{"val_loss", 1.5}};
  m.shards = {
      ShardEntry{0, "shard-00000-of-00002.h5", 10000, 0xabc, "n1", {{"torch", 16, 9000, 1}}},
      ShardEntry{1, "shard-00001-of-00002.h5", 10000, 0xdef, "n2", {}}};
  TensorEntry w{"model/w", DType::bf16, {4, 8}, {}};
  w.pieces = {Piece{0, Slice{{0, 0}, {2, 8}}, 4096, 11}, Piece{1, Slice{{2, 0}, {2, 8}}, 4096, 12}};
  TensorEntry step{"step", DType::i64, {}, {}};
  step.pieces = {Piece{0, Slice{{}, {}}, 8192, 13}, Piece{1, Slice{{}, {}}, 8192, 13}};
  TensorEntry empty{"z", DType::f32, {0, 3}, {Piece{0, Slice{{0, 0}, {0, 3}}, std::nullopt, 14}}};
  m.tensors = {w, step, empty};
  return m;
}

std::string error_of(const std::string& text, bool fragment = false) {
  try {
    manifest_from_json(text, "/c/step-000001200/manifest.json", fragment);
  } catch (const CorruptError& e) {
    return e.what();
  }
  return "";
}

std::string with(const std::function<void(json&)>& edit) {
  json j = json::parse(manifest_to_json(sample()));
  edit(j);
  return j.dump();
}

TEST(CkptManifest, RoundTrips) {
  const Manifest m = sample();
  const std::string text = manifest_to_json(m);
  const Manifest back = manifest_from_json(text, "m.json");
  EXPECT_EQ(manifest_to_json(back), text);
  EXPECT_EQ(back.step, 1200u);
  EXPECT_EQ(back.hyperparameters, R"({"lr":0.001})");
  EXPECT_EQ(back.tensors[0].dtype, DType::bf16);
  EXPECT_EQ(back.tensors[0].pieces[1].slice.offset, (Shape{2, 0}));
  EXPECT_EQ(back.tensors[2].pieces[0].file_offset, std::nullopt);
  EXPECT_EQ(back.shards[0].rng[0].name, "torch");
  const json j = json::parse(text);
  EXPECT_EQ(j["created"], "2024-05-01T12:00:00Z");
  EXPECT_EQ(j["shards"][0]["metadata_xxh3"], "0000000000000abc");
}

TEST(CkptManifest, NamesTheFileAndTheFieldOfEveryProblem) {
  const std::string p = "/c/step-000001200/manifest.json: ";
  EXPECT_EQ(error_of("{"), p.substr(0, p.size() - 2) + ": not valid JSON (byte 2)");
  EXPECT_EQ(error_of("[]"), p + "expected a JSON object");
  EXPECT_EQ(error_of(with([](json& j) { j["format"] = "other"; })),
            p + "format: expected \"dl-ckpt\"");
  EXPECT_EQ(error_of(with([](json& j) { j["format_version"] = 2; })),
            p + "format version 2 is not supported (this library reads version 1)");
  EXPECT_EQ(error_of(with([](json& j) { j.erase("step"); })), p + "step: missing");
  EXPECT_EQ(error_of(with([](json& j) { j["step"] = -1; })),
            p + "step: expected a whole number from 0 to 18446744073709551615");
  EXPECT_EQ(error_of(with([](json& j) { j["tensors"][0]["pieces"][1]["xxh3"] = "XYZ"; })),
            p + "tensors[0].pieces[1].xxh3: expected 16 lowercase hexadecimal digits");
  EXPECT_EQ(error_of(with([](json& j) { j["tensors"][0]["dtype"] = "f128"; })),
            p + "tensors[0].dtype: expected one of f16, bf16, f32, f64, i32, i64, u8");
  EXPECT_EQ(error_of(with([](json& j) { j["world_size"] = 3; })),
            p + "shards: expected 3 shards (the world size), found 2");
  EXPECT_EQ(error_of(with([](json& j) { std::swap(j["shards"][0], j["shards"][1]); })),
            p + "shards[0]: shards must be listed in rank order");
  EXPECT_EQ(error_of(with([](json& j) { j["shards"][1]["file"] = "../../etc/passwd"; })),
            p + "shards[1]: file \"../../etc/passwd\" should be \"shard-00001-of-00002.h5\"");
  EXPECT_EQ(error_of(with([](json& j) {
              j["tensors"][0]["pieces"][1]["offset"] = {3, 0};
            })),
            p + "tensors[0].pieces[1]: box [3, 0]+[2, 8] exceeds the shape [4, 8]");
  EXPECT_EQ(error_of(with([](json& j) {
              j["tensors"][0]["pieces"][1]["offset"] = {1, 0};
            })),
            p + "tensors[0]: tensor model/w: pieces overlap at [1,0]+[2,8]");
  EXPECT_EQ(error_of(with([](json& j) { j["tensors"][0]["pieces"].erase(1); })),
            p + "tensors[0]: tensor model/w: elements from 2 of dimension 0 are in no piece");
  EXPECT_EQ(error_of(with([](json& j) { j["tensors"][1]["pieces"][0]["file_offset"] = 4100; })),
            p + "shard-00000-of-00002.h5: two data ranges overlap");
  EXPECT_EQ(error_of(with([](json& j) { j["shards"][0]["bytes"] = 8195; })),
            p + "shard-00000-of-00002.h5: data range 8192+8 lies beyond the file size 8195");
  EXPECT_EQ(error_of(with([](json& j) { j["tensors"][0]["name"] = "a/../b"; })),
            p + "tensors[0]: invalid tensor name \"a/../b\"");
  EXPECT_EQ(error_of(with([](json& j) { std::swap(j["tensors"][0], j["tensors"][1]); })),
            p + "tensors[1]: tensors must be sorted by name, each once");
  EXPECT_EQ(error_of(with([](json& j) { j["tensors"][2]["pieces"][0]["file_offset"] = 10; })),
            p + "tensors[2].pieces[0]: file_offset must be set exactly when the piece has bytes");
  EXPECT_EQ(error_of(with([](json& j) { j["hyperparameters"] = 5; })),
            p + "hyperparameters: expected a JSON object");
  EXPECT_EQ(error_of(std::string(100, '[') + std::string(100, ']')),
            "/c/step-000001200/manifest.json: JSON nested deeper than 64 levels");
}

TEST(CkptManifest, HugeShapesAreRejectedNotOverflowed) {
  const std::string text = with([](json& j) {
    j["tensors"][2]["shape"] = {4294967296ull, 4294967296ull, 2};
    j["tensors"][2]["pieces"][0]["shape"] = {4294967296ull, 4294967296ull, 2};
    j["tensors"][2]["pieces"][0]["offset"] = {0, 0, 0};
  });
  EXPECT_NE(error_of(text).find("overflows"), std::string::npos) << error_of(text);
}

TEST(CkptManifest, AFragmentHoldsOneShardAndNeedNotTile) {
  Manifest f = sample();
  f.shards.pop_back();
  for (TensorEntry& t : f.tensors) t.pieces.resize(1);
  EXPECT_EQ(error_of(manifest_to_json(f), true), "");
  EXPECT_NE(error_of(manifest_to_json(f), false), "");
}

TEST(CkptManifest, FragmentsMergeIntoTheManifest) {
  const Manifest whole = sample();
  std::vector<Manifest> fragments;
  for (unsigned r : {1u, 0u}) {
    Manifest f = whole;
    f.shards = {whole.shards[r]};
    f.tensors.clear();
    for (TensorEntry t : whole.tensors) {
      std::vector<Piece> mine;
      for (const Piece& p : t.pieces) {
        if (p.rank == r) mine.push_back(p);
      }
      if (mine.empty()) continue;
      t.pieces = mine;
      f.tensors.push_back(t);
    }
    if (r == 1) f.host = "n2";
    fragments.push_back(f);
  }
  const Manifest merged = merge_fragments(fragments, "m.json");
  EXPECT_EQ(merged.host, "n1");  // rank 0's global fields
  EXPECT_EQ(merged.shards.size(), 2u);
  EXPECT_EQ(merged.tensors.size(), 3u);
  EXPECT_EQ(merged.tensors[0].pieces.size(), 2u);

  fragments[0].step = 1300;
  try {
    merge_fragments(fragments, "m.json");
    FAIL();
  } catch (const CorruptError& e) {
    EXPECT_STREQ(
        e.what(),
        "m.json: rank 1 saved step 1300 of world size 2, rank 0 step 1200 of world size 2");
  }
  fragments[0].step = 1200;
  fragments[0].tensors[0].dtype = DType::f32;
  EXPECT_THROW(merge_fragments(fragments, "m.json"), CorruptError);
  fragments.pop_back();
  EXPECT_THROW(merge_fragments(fragments, "m.json"), CorruptError);
}

TEST(CkptManifest, DataRangesAndGaps) {
  const Manifest m = sample();
  const std::vector<ByteRange> r0 = data_ranges(m, 0);
  ASSERT_EQ(r0.size(), 3u);
  EXPECT_EQ(r0[0].offset, 4096u);
  EXPECT_EQ(r0[0].size, 32u);  // 2x8 bf16
  EXPECT_EQ(r0[1].offset, 8192u);
  EXPECT_EQ(r0[2].offset, 9000u);
  const std::vector<ByteRange> g = gaps(r0, 10000);
  ASSERT_EQ(g.size(), 4u);
  EXPECT_EQ(g[0].offset, 0u);
  EXPECT_EQ(g[0].size, 4096u);
  EXPECT_EQ(g[1].offset, 4128u);
  EXPECT_EQ(g[3].offset, 9016u);
  EXPECT_EQ(g[3].size, 984u);
  EXPECT_TRUE(gaps({{0, 10}}, 10).empty());
  EXPECT_EQ(total_bytes(m), 20000u);
  EXPECT_EQ(find_tensor(m, "step")->dtype, DType::i64);
  EXPECT_EQ(find_tensor(m, "nope"), nullptr);
}

TEST(CkptManifest, HexAndJsonHelpers) {
  EXPECT_EQ(hex64(0x0123456789abcdefull), "0123456789abcdef");
  EXPECT_EQ(parse_hex64("0123456789abcdef"), 0x0123456789abcdefull);
  EXPECT_FALSE(parse_hex64("0123456789ABCDEF"));
  EXPECT_FALSE(parse_hex64("123"));
  EXPECT_EQ(metrics_json({{"a", 1.5}}), R"({"a":1.5})");
  EXPECT_EQ(compact_json_object(R"({ "a" : [1, 2] })", "x"), R"({"a":[1,2]})");
  EXPECT_THROW(compact_json_object("[1]", "x"), InputError);
  EXPECT_THROW(compact_json_object("{", "x"), InputError);
  // 64 levels of nesting at most (the object itself is the first).
  const auto nested = [](int levels) {
    return "{\"a\":" + std::string(levels - 1, '[') + std::string(levels - 1, ']') + "}";
  };
  EXPECT_NO_THROW(compact_json_object(nested(64), "x"));
  EXPECT_THROW(compact_json_object(nested(65), "x"), InputError);
}

}  // namespace
}  // namespace dl::ckpt

namespace dl::ckpt {
namespace {

TEST(CkptManifest, WriterRoundTripsAndOldManifestsWithoutOneStillLoad) {
  Manifest m = sample();
  m.writer = Writer{"4712", "4700", "3", "alice", 1000};
  const Manifest back = manifest_from_json(manifest_to_json(m), "m.json");
  ASSERT_TRUE(back.writer);
  EXPECT_EQ(back.writer->job_key(), "4700_3");
  EXPECT_EQ(back.writer->user, "alice");
  EXPECT_EQ(back.writer->uid, 1000u);
  EXPECT_EQ(describe_writer(back.writer), "array task 4700_3 (user alice, uid 1000)");
  // A manifest written before the field existed: same version, no writer.
  const Manifest old = manifest_from_json(manifest_to_json(sample()), "m.json");
  EXPECT_FALSE(old.writer);
  EXPECT_EQ(describe_writer(old.writer), "an unknown job");
  // A malformed writer is a corrupt manifest, not a trusted one.
  m.writer = Writer{"47x", "", "", "alice", 1000};
  json j = json::parse(manifest_to_json(sample()));
  j["writer"] = {{"job_id", "47x"}, {"user", "alice"}, {"uid", 1}};
  EXPECT_NE(error_of(j.dump(), false).find("writer: job_id"), std::string::npos);
}

TEST(CkptManifest, WriterFromTheEnvironment) {
  const std::map<std::string, const char*> env = {
      {"SLURM_JOB_ID", "4712"}, {"SLURM_ARRAY_JOB_ID", "4700"}, {"SLURM_ARRAY_TASK_ID", "3"}};
  const auto lookup = [&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second;
  };
  const Writer w = writer_from_env(lookup, 1000, "alice");
  EXPECT_EQ(w.job_key(), "4700_3");
  EXPECT_EQ(w.job_id, "4712");
  const Writer plain = writer_from_env(
      [](const char* name) -> const char* {
        return std::string(name) == "SLURM_JOB_ID" ? "4711" : nullptr;
      },
      1000, "alice");
  EXPECT_EQ(plain.job_key(), "4711");
  EXPECT_EQ(
      writer_from_env([](const char*) -> const char* { return "x; rm"; }, 0, "root").job_key(), "");
}

}  // namespace
}  // namespace dl::ckpt
