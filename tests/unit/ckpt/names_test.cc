#include "ckpt/names.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace dl::ckpt {
namespace {

std::string tensor_name_error(std::string_view name) {
  try {
    validate_tensor_name(name);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(CkptNames, StepDirectoriesSortAndRoundTrip) {
  EXPECT_EQ(step_dir_name(1200), "step-000001200");
  EXPECT_EQ(step_dir_name(0), "step-000000000");
  EXPECT_EQ(step_dir_name(12345678901), "step-12345678901");
  for (std::uint64_t step :
       {0ull, 7ull, 1200ull, 999999999ull, 1000000000ull, 18446744073709551615ull}) {
    EXPECT_EQ(parse_step_dir_name(step_dir_name(step)), step);
  }
}

TEST(CkptNames, OnlyTheCanonicalStepNameIsACheckpoint) {
  for (const char* bad :
       {"step-1", "step-0000000001", "step-", "step-00000001a", "Step-000000001",
        "step-000000001.tmp", "x", "step--00000001", "step-99999999999999999999"}) {
    EXPECT_FALSE(parse_step_dir_name(bad)) << bad;
  }
}

TEST(CkptNames, ShardsStagingAndDeletion) {
  EXPECT_EQ(shard_file_name(3, 8), "shard-00003-of-00008.h5");
  EXPECT_EQ(fragment_file_name(3, 8), "shard-00003-of-00008.json");
  EXPECT_EQ(staging_dir_name(1300, "42.0.1"), ".tmp-step-000001300.42.0.1");
  const auto s = parse_staging_dir_name(".tmp-step-000001300.42.0.1");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->step, 1300u);
  EXPECT_EQ(s->run_id, "42.0.1");
  EXPECT_FALSE(parse_staging_dir_name(".tmp-step-000001300"));
  EXPECT_FALSE(parse_staging_dir_name(".tmp-step-000001300."));
  EXPECT_FALSE(parse_staging_dir_name("step-000001300"));
  EXPECT_EQ(deleting_dir_name(800, "77"), ".del-step-000000800.77");
  EXPECT_TRUE(is_deleting_dir_name(".del-step-000000800.77"));
  EXPECT_FALSE(is_deleting_dir_name(".del-"));
  EXPECT_FALSE(is_deleting_dir_name("step-000000800"));
}

TEST(CkptNames, TensorNamesArePathsOfSafeComponents) {
  for (const char* good : {"w", "model/layers.0/attn.qkv.weight", "a:b/c+d-e_f", "x/y/z"}) {
    EXPECT_EQ(tensor_name_error(good), "") << good;
    EXPECT_TRUE(is_valid_tensor_name(good));
  }
  EXPECT_EQ(tensor_name_error(""), "tensor name \"\" is empty");
  EXPECT_EQ(tensor_name_error("/w"),
            "tensor name \"/w\" has an empty component (leading, trailing or double '/')");
  EXPECT_EQ(tensor_name_error("a//b"),
            "tensor name \"a//b\" has an empty component (leading, trailing or double '/')");
  EXPECT_EQ(tensor_name_error("a/../b"), "tensor name \"a/../b\" has a '.' or '..' component");
  EXPECT_EQ(tensor_name_error("a b"),
            "tensor name \"a b\" contains \" \"; allowed are letters, digits and _ . : + - (and / "
            "between components)");
  EXPECT_NE(tensor_name_error(std::string(1025, 'a')), "");
  EXPECT_FALSE(is_valid_tensor_name("a\nb"));
}

TEST(CkptNames, RngNamesAndRunIds) {
  EXPECT_NO_THROW(validate_rng_name("cuda:0"));
  EXPECT_THROW(validate_rng_name("a/b"), InputError);
  EXPECT_THROW(validate_rng_name(""), InputError);
  EXPECT_NO_THROW(validate_run_id("1234.0.2"));
  EXPECT_THROW(validate_run_id(""), InputError);
  EXPECT_THROW(validate_run_id("a/b"), InputError);
  EXPECT_THROW(validate_run_id(std::string(65, 'a')), InputError);
}

TEST(CkptNames, UtcTimes) {
  EXPECT_EQ(format_utc(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(format_utc(1714564800), "2024-05-01T12:00:00Z");
}

}  // namespace
}  // namespace dl::ckpt
