#include <dl/ckpt.h>
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "ckpt/h5.h"
#include "ckpt/names.h"
#include "ckpt/store.h"
#include "core/error.h"
#include "tests/unit/ckpt/test_util.h"

namespace dl::ckpt {
namespace {

using Bytes = std::vector<std::uint8_t>;
using test::LogCapture;
using test::names_in;
using test::TempDir;

Bytes random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  Bytes b(n);
  for (auto& x : b) x = static_cast<std::uint8_t>(rng());
  return b;
}

std::uint64_t count(const Shape& s) {
  std::uint64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

// A tensor with random contents (every bit pattern, NaNs included: checks are bitwise).
struct Held {
  std::string name;
  DType dtype;
  Shape shape;
  Bytes data;
};

Held held(std::string name, DType dtype, Shape shape, unsigned seed) {
  const std::size_t n = count(shape) * dtype_size(dtype);
  return {std::move(name), dtype, std::move(shape), random_bytes(n, seed)};
}

State state_of(const std::vector<Held>& tensors, std::uint64_t step) {
  State s;
  s.meta.step = step;
  for (const Held& t : tensors) s.tensors.push_back({t.name, t.dtype, t.shape, t.data.data()});
  return s;
}

Options options(const std::string& dir) {
  Options o;
  o.dir = dir;
  o.run_id = "test";
  return o;
}

// Loads every tensor of `expected` whole and compares it bit for bit.
void expect_loads(const std::string& dir, const std::vector<Held>& expected, std::uint64_t step) {
  std::vector<Bytes> out;
  std::vector<Target> targets;
  for (const Held& t : expected) out.emplace_back(t.data.size(), 0xaa);
  for (std::size_t i = 0; i < expected.size(); ++i) {
    targets.push_back({expected[i].name, expected[i].dtype, expected[i].shape, out[i].data()});
  }
  const auto loaded = load_latest(dir, targets);
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->meta.step, step);
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(out[i], expected[i].data) << expected[i].name;
  }
}

std::vector<Held> every_dtype() {
  std::vector<Held> t;
  unsigned seed = 1;
  for (DType d : kAllDTypes) {
    t.push_back(held(fmt::format("model/{}", dtype_name(d)), d, {3, 5}, seed++));
  }
  t.push_back(held("scalar", DType::i64, {}, seed++));
  t.push_back(held("empty", DType::f32, {0, 7}, seed++));
  t.push_back(held("deep/a/b/c/cube", DType::f16, {2, 3, 4}, seed++));
  return t;
}

TEST(CkptSaveLoad, EveryDtypeRoundTripsBitForBit) {
  TempDir dir;
  const auto tensors = every_dtype();
  Checkpointer ckpt(options(dir.path()));
  State s = state_of(tensors, 1200);
  s.meta.epoch = 3;
  s.meta.data_loader_position = 4096;
  s.meta.hyperparameters = R"({"lr": 0.001, "schedule": {"warmup": 100}})";
  s.meta.user_metadata = R"({"git": "abc123"})";
  s.meta.metrics = {{"val_loss", 1.25}};
  s.rng_states = {
      {"std::mt19937", random_bytes(5000, 9)}, {"cuda:0", random_bytes(16, 10)}, {"empty", {}}};
  const std::string path = ckpt.save(s);
  EXPECT_EQ(path, dir / "step-000001200");

  std::vector<Bytes> out;
  std::vector<Target> targets;
  for (const Held& t : tensors) out.emplace_back(t.data.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    targets.push_back({tensors[i].name, tensors[i].dtype, tensors[i].shape, out[i].data()});
  }
  const auto loaded = load_latest(dir.path(), targets);
  ASSERT_TRUE(loaded);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(out[i], tensors[i].data) << tensors[i].name;
  }
  EXPECT_EQ(loaded->path, path);
  EXPECT_EQ(loaded->world_size, 1u);
  EXPECT_EQ(loaded->meta.step, 1200u);
  EXPECT_EQ(loaded->meta.epoch, 3u);
  EXPECT_EQ(loaded->meta.data_loader_position, 4096u);
  EXPECT_EQ(loaded->meta.hyperparameters, R"({"lr":0.001,"schedule":{"warmup":100}})");
  EXPECT_EQ(loaded->meta.user_metadata, R"({"git":"abc123"})");
  EXPECT_EQ(loaded->meta.metrics, s.meta.metrics);
  EXPECT_EQ(loaded->rng_states, s.rng_states);

  const Reader r = Reader::open(path, Verify::full);
  EXPECT_EQ(r.tensors().size(), tensors.size());
  const auto info = r.tensor("model/bf16");
  ASSERT_TRUE(info);
  EXPECT_EQ(info->dtype, DType::bf16);
  EXPECT_EQ(info->shape, (Shape{3, 5}));
  EXPECT_EQ(info->ranks, std::vector<unsigned>{0});
  EXPECT_EQ(r.host(), sys::hostname());
  EXPECT_NEAR(static_cast<double>(r.created_unix()), static_cast<double>(std::time(nullptr)), 60);
}

TEST(CkptSaveLoad, TheDirectoryHoldsOnlyCommittedCheckpoints) {
  TempDir dir;
  const auto tensors = every_dtype();
  Checkpointer ckpt(options(dir.path()));
  ckpt.save(state_of(tensors, 100));
  ckpt.save(state_of(tensors, 200));
  EXPECT_EQ(names_in(dir.path()),
            (std::vector<std::string>{"latest", "step-000000100", "step-000000200"}));
  EXPECT_EQ(names_in(dir / "step-000000200"),
            (std::vector<std::string>{"manifest.json", "shard-00000-of-00001.h5"}));
  EXPECT_EQ(sys::read_file(dir / "latest", 100), "step-000000200\n");
  // An older step saved later does not move `latest` back.
  ckpt.save(state_of(tensors, 150));
  EXPECT_EQ(sys::read_file(dir / "latest", 100), "step-000000200\n");
  expect_loads(dir.path(), tensors, 200);
}

TEST(CkptSaveLoad, TheShardIsSelfDescribingHdf5) {
  TempDir dir;
  const auto tensors = every_dtype();
  Checkpointer ckpt(options(dir.path()));
  State s = state_of(tensors, 7);
  s.meta.epoch = 2;
  const std::string path = ckpt.save(s) + "/shard-00000-of-00001.h5";
  h5::ErrorSilencer quiet;
  const h5::File f = h5::open_file(path, false);
  EXPECT_EQ(h5::read_attr_string(f, f.get(), "dl_format"), "dl-ckpt");
  EXPECT_EQ(h5::read_attr_u64(f, f.get(), "format_version"), 1u);
  EXPECT_EQ(h5::read_attr_u64(f, f.get(), "step"), 7u);
  EXPECT_EQ(h5::read_attr_u64(f, f.get(), "epoch"), 2u);
  EXPECT_EQ(h5::read_attr_u64(f, f.get(), "world_size"), 1u);
  const h5::Handle bf16 = h5::open_dataset(f, "tensors/model/bf16");
  EXPECT_TRUE(h5::dataset_has_type(f, bf16, DType::bf16));
  EXPECT_EQ(h5::read_attr_string(f, bf16.get(), "dtype"), "bf16");
  EXPECT_EQ(h5::read_attr_u64s(f, bf16.get(), "global_shape"), (Shape{3, 5}));
  EXPECT_EQ(h5::read_attr_u64s(f, bf16.get(), "offset"), (Shape{0, 0}));
  EXPECT_NE(h5::read_attr_u64(f, bf16.get(), "xxh3_64"), 0u);
  EXPECT_TRUE(h5::dataset_is_contiguous(f, bf16));
  // The bytes sit where the dataset says, as they are in memory.
  const auto offset = h5::dataset_offset(f, bf16);
  ASSERT_TRUE(offset);
  Bytes on_disk(tensors[1].data.size());
  sys::read_exact_at(sys::open_file(path, O_RDONLY), on_disk.data(), on_disk.size(), *offset);
  EXPECT_EQ(on_disk, tensors[1].data);
}

TEST(CkptSaveLoad, SavesAreCopiedBeforeSaveAsyncReturns) {
  TempDir dir;
  auto tensors = every_dtype();
  const auto original = tensors;
  Checkpointer ckpt(options(dir.path()));
  ckpt.save_async(state_of(tensors, 300));
  EXPECT_GT(ckpt.last_copy_time(), std::chrono::nanoseconds(0));
  for (Held& t : tensors) std::fill(t.data.begin(), t.data.end(), 0);  // training goes on
  ckpt.wait();
  EXPECT_FALSE(ckpt.in_flight());
  expect_loads(dir.path(), original, 300);
  ckpt.save_async(state_of(original, 400));  // host buffers are reused
  ckpt.wait();
  expect_loads(dir.path(), original, 400);
}

TEST(CkptSaveLoad, BackPressureWaitsForTheSaveInFlight) {
  TempDir dir;
  const auto tensors = every_dtype();
  Checkpointer ckpt(options(dir.path()));
  sys::ScopedCalls restore;
  const auto real = sys::calls().pwrite;
  sys::calls().pwrite = [real](int fd, const void* b, std::size_t n, off_t o) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return real(fd, b, n, o);
  };
  ckpt.save_async(state_of(tensors, 1));
  EXPECT_TRUE(ckpt.in_flight());
  ckpt.save_async(state_of(tensors, 2));
  EXPECT_GT(ckpt.last_backpressure_wait(), std::chrono::milliseconds(20));
  ckpt.wait();
  expect_loads(dir.path(), tensors, 2);
  EXPECT_TRUE(sys::file_type(dir / "step-000000001") == sys::FileType::directory);
}

TEST(CkptSaveLoad, LoadFallsBackFromACorruptNewestWithOneWarning) {
  struct Damage {
    const char* name;
    std::function<void(const std::string& step_dir)> apply;
    const char* reason;
  };
  const std::vector<Damage> damages = {
      {"data byte",
       [](const std::string& d) {
         const Manifest m = read_manifest(d);
         test::flip_byte(d + "/shard-00000-of-00001.h5", *m.tensors[0].pieces[0].file_offset + 3);
       },
       "checksum mismatch"},
      {"truncated",
       [](const std::string& d) { test::truncate_file(d + "/shard-00000-of-00001.h5", 1000); },
       "(truncated)"},
      {"metadata byte",
       [](const std::string& d) { test::flip_byte(d + "/shard-00000-of-00001.h5", 200); },
       "HDF5 metadata checksum mismatch"},
      {"garbage manifest",
       [](const std::string& d) { test::write_bytes(d + "/manifest.json", "\x01garbage"); },
       "not valid JSON"},
      {"no manifest", [](const std::string& d) { sys::remove_file(d + "/manifest.json"); },
       "not a checkpoint (no manifest.json)"},
      {"shard replaced by garbage",
       [](const std::string& d) {
         const std::uint64_t size = sys::file_size(d + "/shard-00000-of-00001.h5");
         test::write_bytes(d + "/shard-00000-of-00001.h5", std::string(size, 'x'));
       },
       "HDF5 metadata checksum mismatch"},
  };
  for (const Damage& damage : damages) {
    SCOPED_TRACE(damage.name);
    TempDir dir;
    const auto tensors = every_dtype();
    Checkpointer ckpt(options(dir.path()));
    ckpt.save(state_of(tensors, 100));
    ckpt.save(state_of(tensors, 200));
    damage.apply(dir / "step-000000200");
    LogCapture log;
    expect_loads(dir.path(), tensors, 100);
    const auto warnings = log.at(LogLevel::warning);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find(dir / "step-000000200"), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[0].find(damage.reason), std::string::npos) << warnings[0];
  }
}

TEST(CkptSaveLoad, VerifyLevelsReadWhatTheyPromise) {
  TempDir dir;
  const auto tensors = every_dtype();
  Checkpointer ckpt(options(dir.path()));
  const std::string step = ckpt.save(state_of(tensors, 5));
  const Manifest m = read_manifest(step);
  const TensorEntry& f32 = *find_tensor(m, "model/f32");
  test::flip_byte(step + "/shard-00000-of-00001.h5", *f32.pieces[0].file_offset);
  EXPECT_NO_THROW(Reader::open(step, Verify::quick));
  EXPECT_NO_THROW(Reader::open(step, Verify::metadata));
  try {
    Reader::open(step, Verify::full);
    FAIL();
  } catch (const CorruptError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  step + "/shard-00000-of-00001.h5: tensor model/f32: checksum mismatch"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(latest_valid(dir.path(), Verify::metadata), step);
  LogCapture log;
  EXPECT_EQ(latest_valid(dir.path(), Verify::full), std::nullopt);
  EXPECT_EQ(log.at(LogLevel::warning).size(), 1u);
}

TEST(CkptSaveLoad, ListingMarksLatestAndProblems) {
  TempDir dir;
  const auto tensors = every_dtype();
  Checkpointer ckpt(options(dir.path()));
  State s = state_of(tensors, 10);
  s.meta.metrics = {{"loss", 2.0}};
  ckpt.save(s);
  ckpt.save(state_of(tensors, 20));
  test::truncate_file(dir / "step-000000010/shard-00000-of-00001.h5", 10);
  sys::make_dir(dir / "not-a-step");
  const auto list = list_checkpoints(dir.path());
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].step, 10u);
  EXPECT_FALSE(list[0].valid);
  EXPECT_NE(list[0].problem.find("(truncated)"), std::string::npos);
  EXPECT_EQ(list[0].meta.metrics.at("loss"), 2.0);
  EXPECT_FALSE(list[0].latest);
  EXPECT_TRUE(list[1].valid);
  EXPECT_TRUE(list[1].latest);
  EXPECT_EQ(list[1].world_size, 1u);
  EXPECT_EQ(list[1].tensors, tensors.size());
  EXPECT_THROW(list_checkpoints(dir / "nope"), SystemError);
  EXPECT_FALSE(load_latest(dir / "nope", {}));
}

TEST(CkptSaveLoad, RetentionKeepsTheLastNAndTheBest) {
  TempDir dir;
  const auto tensors = every_dtype();
  Options o = options(dir.path());
  o.retention = {2, 1, "loss", false};
  Checkpointer ckpt(o);
  const double losses[] = {0.9, 0.1, 0.5, 0.7, 0.8};
  for (int i = 0; i < 5; ++i) {
    State s = state_of(tensors, 100 * (i + 1));
    s.meta.metrics = {{"loss", losses[i]}};
    ckpt.save(s);
  }
  EXPECT_EQ(names_in(dir.path()), (std::vector<std::string>{"latest", "step-000000200",
                                                            "step-000000400", "step-000000500"}));
  // prune by hand, dry run first
  const Retention keep1{1, 0, "", false};
  EXPECT_EQ(prune(dir.path(), keep1, true),
            (std::vector<std::string>{dir / "step-000000200", dir / "step-000000400"}));
  EXPECT_EQ(names_in(dir.path()).size(), 4u);
  prune(dir.path(), keep1);
  EXPECT_EQ(names_in(dir.path()), (std::vector<std::string>{"latest", "step-000000500"}));
}

TEST(CkptSaveLoad, SavingAStepAgainReplacesIt) {
  TempDir dir;
  auto tensors = every_dtype();
  Checkpointer ckpt(options(dir.path()));
  ckpt.save(state_of(tensors, 100));
  tensors[0].data.assign(tensors[0].data.size(), 7);
  ckpt.save(state_of(tensors, 100));
  expect_loads(dir.path(), tensors, 100);
  EXPECT_EQ(names_in(dir.path()), (std::vector<std::string>{"latest", "step-000000100"}));
}

// The global contents of the tensors four ranks share in MultiRank below.
struct Global {
  Held w = held("w", DType::f32, {10, 6}, 1);   // split by rows
  Held c = held("c", DType::bf16, {4, 9}, 2);   // split by columns
  Held b = held("b", DType::f64, {6}, 3);       // replicated
  Held step = held("step", DType::i64, {}, 4);  // replicated scalar
};

Bytes cut(const Held& t, const Slice& s) {
  Bytes out;
  const std::size_t e = dtype_size(t.dtype);
  const std::uint64_t rows = t.shape[0], cols = t.shape[1];
  for (std::uint64_t r = 0; r < rows; ++r) {
    for (std::uint64_t c = 0; c < cols; ++c) {
      if (r >= s.offset[0] && r < s.offset[0] + s.shape[0] && c >= s.offset[1] &&
          c < s.offset[1] + s.shape[1]) {
        out.insert(out.end(), t.data.begin() + (r * cols + c) * e,
                   t.data.begin() + (r * cols + c + 1) * e);
      }
    }
  }
  return out;
}

TEST(CkptSaveLoad, MultiRankSavesReshardOnLoad) {
  TempDir dir;
  const Global g;
  const unsigned world = 4;
  std::vector<std::thread> ranks;
  std::vector<std::string> errors(world);
  for (unsigned r = 0; r < world; ++r) {
    ranks.emplace_back([&, r] {
      try {
        Options o = options(dir.path());
        o.rank = r;
        o.world_size = world;
        Checkpointer ckpt(o);
        const Slice ws = even_split(g.w.shape, 0, r, world);
        const Slice cs = even_split(g.c.shape, 1, r, world);
        const Bytes wpart = cut(g.w, ws), cpart = cut(g.c, cs);
        const Held mine = held(fmt::format("rank{}/only", r), DType::u8, {r + 1}, 10 + r);
        State s;
        s.meta.step = 500;
        s.tensors = {{"w", DType::f32, ws.shape, wpart.data(), g.w.shape, ws.offset},
                     {"c", DType::bf16, cs.shape, cpart.data(), g.c.shape, cs.offset},
                     {"b", DType::f64, g.b.shape, g.b.data.data()},
                     {"step", DType::i64, {}, g.step.data.data()},
                     {mine.name, mine.dtype, mine.shape, mine.data.data()}};
        s.rng_states["gen"] = Bytes(8, static_cast<std::uint8_t>(r));
        ckpt.save_async(s);
        ckpt.wait();
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (unsigned r = 0; r < world; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  EXPECT_EQ(names_in(dir / "step-000000500"),
            (std::vector<std::string>{"manifest.json", "shard-00000-of-00004.h5",
                                      "shard-00001-of-00004.h5", "shard-00002-of-00004.h5",
                                      "shard-00003-of-00004.h5"}));
  EXPECT_NO_THROW(Reader::open(dir / "step-000000500", Verify::full));

  // Elastic resume with 3 ranks: rows of w and columns of c re-split three ways.
  for (unsigned r = 0; r < 3; ++r) {
    const Slice ws = even_split(g.w.shape, 0, r, 3);
    const Slice cs = even_split(g.c.shape, 1, r, 3);
    Bytes w(count(ws.shape) * 4), c(count(cs.shape) * 2), b(48), step(8), only(1);
    const auto loaded = load_latest(dir.path(),
                                    {{"w", DType::f32, ws.shape, w.data(), ws.offset},
                                     {"c", DType::bf16, cs.shape, c.data(), cs.offset},
                                     {"b", DType::f64, {6}, b.data()},
                                     {"step", DType::i64, {}, step.data()},
                                     {"rank0/only", DType::u8, {1}, only.data()}},
                                    r);
    ASSERT_TRUE(loaded);
    EXPECT_EQ(loaded->world_size, 4u);
    EXPECT_EQ(w, cut(g.w, ws)) << r;
    EXPECT_EQ(c, cut(g.c, cs)) << r;
    EXPECT_EQ(b, g.b.data);
    EXPECT_EQ(step, g.step.data);
    EXPECT_EQ(only, held("rank0/only", DType::u8, {1}, 10).data);
    EXPECT_EQ(loaded->rng_states.at("gen"), Bytes(8, static_cast<std::uint8_t>(r)));
  }
  const Reader reader = Reader::open(dir / "step-000000500");
  EXPECT_TRUE(reader.rng_states(7).empty());
  EXPECT_EQ(reader.tensor("b")->ranks, (std::vector<unsigned>{0, 1, 2, 3}));
  Bytes whole(10 * 6 * 4);
  reader.read("w", DType::f32, whole.data());
  EXPECT_EQ(whole, g.w.data);
  EXPECT_THROW(reader.read("w", DType::f64, whole.data()), InputError);
  EXPECT_THROW(reader.read("nope", DType::f32, whole.data()), InputError);
  EXPECT_THROW(reader.read("w", DType::f32, whole.data(), Slice{{8, 0}, {3, 6}}), InputError);

  // Exported as one file with whole tensors.
  export_hdf5(dir / "step-000000500", dir / "export.h5");
  h5::ErrorSilencer quiet;
  const h5::File f = h5::open_file(dir / "export.h5", false);
  const h5::Handle ds = h5::open_dataset(f, "tensors/c");
  EXPECT_EQ(h5::dataset_shape(f, ds), g.c.shape);
  Bytes exported(g.c.data.size());
  sys::read_exact_at(sys::open_file(dir / "export.h5", O_RDONLY), exported.data(), exported.size(),
                     *h5::dataset_offset(f, ds));
  EXPECT_EQ(exported, g.c.data);
  EXPECT_EQ(h5::read_attr_u64(f, f.get(), "world_size"), 1u);
}

TEST(CkptSaveLoad, RankZeroGivesUpWhenARankNeverArrives) {
  TempDir dir;
  Options o = options(dir.path());
  o.world_size = 2;
  o.commit_timeout = std::chrono::seconds(1);
  Checkpointer ckpt(o);
  try {
    ckpt.save(state_of(every_dtype(), 9));
    FAIL();
  } catch (const SystemError& e) {
    EXPECT_EQ(std::string(e.what()),
              "couldn't commit step 9: no shard from rank(s) 1 after 1 s in " +
                  (dir / ".tmp-step-000000009.test"));
  }
  EXPECT_FALSE(load_latest(dir.path(), {}));
}

TEST(CkptSaveLoad, BadStatesAreRejectedBeforeAnythingIsWritten) {
  TempDir dir;
  Checkpointer ckpt(options(dir.path()));
  const float x[4] = {};
  const auto error_of = [&](State s) {
    try {
      ckpt.save(s);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  State s;
  s.tensors = {{"a b", DType::f32, {4}, x}};
  EXPECT_NE(error_of(s).find("tensor name \"a b\" contains"), std::string::npos);
  s.tensors = {{"w", DType::f32, {4}, x}, {"w", DType::f32, {4}, x}};
  EXPECT_EQ(error_of(s), "tensor w is given twice");
  s.tensors = {{"w", DType::f32, {4}, x, {6}, {3}}};
  EXPECT_EQ(error_of(s),
            "tensor w: the part at offset [3] of shape [4] does not fit in the global shape [6]");
  s.tensors = {{"w", DType::f32, {4}, nullptr}};
  EXPECT_EQ(error_of(s), "tensor w: no data");
  s.tensors = {};
  s.meta.hyperparameters = "[1]";
  EXPECT_EQ(error_of(s), "checkpoint hyperparameters: expected a JSON object");
  s.meta.hyperparameters = "{}";
  s.meta.metrics = {{"loss", std::nan("")}};
  EXPECT_EQ(error_of(s), "checkpoint metric \"loss\" is nan");
  s.meta.metrics = {};
  s.rng_states = {{"a/b", {}}};
  EXPECT_NE(error_of(s).find("RNG state name \"a/b\""), std::string::npos);
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{});
}

TEST(CkptOptions, ValidatedAtConstruction) {
  TempDir dir;
  Options o = options(dir.path());
  o.rank = 2;
  o.world_size = 2;
  EXPECT_THROW(Checkpointer{o}, InputError);
  o = options(dir.path());
  o.retention.keep_best = 1;
  EXPECT_THROW(Checkpointer{o}, InputError);
  o = options(dir.path());
  o.run_id = "a/b";
  EXPECT_THROW(Checkpointer{o}, InputError);
  o = options(dir.path());
  o.world_size = 2;
  o.run_id = "";
  ::unsetenv("DL_CKPT_RUN_ID");
  ::unsetenv("SLURM_JOB_ID");
  EXPECT_THROW(Checkpointer{o}, InputError);
  test::write_bytes(dir / "file", "x");
  o = options(dir / "file");
  EXPECT_THROW(Checkpointer{o}, SystemError);
  o = options(dir / "new/sub");
  o.run_id = "";
  const Checkpointer alone(o);  // one rank, no Slurm: the process id tells runs apart
  EXPECT_EQ(alone.options().run_id, fmt::format("pid{}", ::getpid()));
  EXPECT_EQ(sys::file_type(dir / "new/sub"), sys::FileType::directory);
  ::setenv("SLURM_JOB_ID", "42", 1);
  ::setenv("SLURM_RESTART_COUNT", "3", 1);
  EXPECT_EQ(Checkpointer(o).options().run_id, "42.0.3");
  ::unsetenv("SLURM_JOB_ID");
  ::unsetenv("SLURM_RESTART_COUNT");
}

TEST(CkptOptions, FromTheEnvironment) {
  ::setenv("DL_CKPT_DIR", "/x/ckpt", 1);
  ::setenv("DL_CKPT_KEEP", "3", 1);
  ::setenv("DL_CKPT_KEEP_BEST", "2", 1);
  ::setenv("DL_CKPT_METRIC", "acc", 1);
  ::setenv("DL_CKPT_METRIC_MODE", "max", 1);
  ::setenv("RANK", "2", 1);
  ::setenv("WORLD_SIZE", "4", 1);
  Options o = Options::from_env();
  EXPECT_EQ(o.dir, "/x/ckpt");
  EXPECT_EQ(o.retention.keep_last, 3u);
  EXPECT_EQ(o.retention.keep_best, 2u);
  EXPECT_EQ(o.retention.metric, "acc");
  EXPECT_TRUE(o.retention.higher_is_better);
  EXPECT_EQ(o.rank, 2u);
  EXPECT_EQ(o.world_size, 4u);
  ::setenv("DL_CKPT_KEEP", "many", 1);
  try {
    Options::from_env();
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "DL_CKPT_KEEP=many: expected a whole number from 0 to 1000000");
  }
  ::setenv("DL_CKPT_KEEP", "3", 1);
  ::setenv("RANK", "4", 1);
  EXPECT_THROW(Options::from_env(), InputError);
  for (const char* v : {"DL_CKPT_DIR", "DL_CKPT_KEEP", "DL_CKPT_KEEP_BEST", "DL_CKPT_METRIC",
                        "DL_CKPT_METRIC_MODE", "RANK", "WORLD_SIZE"}) {
    ::unsetenv(v);
  }
  EXPECT_THROW(Options::from_env(), InputError);
}

}  // namespace
}  // namespace dl::ckpt
