#include "core/gpu_owner.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"

namespace dl {
namespace {

std::string refusal(const std::string& text) {
  try {
    parse_gpu_owner(text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(GpuOwner, RoundTripsThroughItsRecord) {
  const GpuOwner o{"n1", 42, 1000, "dltest", {0, 3}, "vision"};
  EXPECT_EQ(format_gpu_owner(o), "node=n1 job=42 uid=1000 user=dltest gpus=0,3 account=vision\n");
  EXPECT_EQ(gpu_owner_file_name(o), "n1.42");
  const GpuOwner back = parse_gpu_owner(format_gpu_owner(o));
  EXPECT_EQ(back.node, "n1");
  EXPECT_EQ(back.job, 42u);
  EXPECT_EQ(back.uid, 1000u);
  EXPECT_EQ(back.user, "dltest");
  EXPECT_EQ(back.gpus, (std::vector<unsigned>{0, 3}));
  EXPECT_EQ(back.account, "vision");
  // Without accounting, no account; a record of an earlier version, none either.
  EXPECT_EQ(parse_gpu_owner("node=n1 job=1 uid=0 user=a gpus=0 account=\n").account, "");
  EXPECT_EQ(parse_gpu_owner("node=n1 job=1 uid=0 user=a gpus=0\n").account, "");
}

TEST(GpuOwner, RefusesHostileRecords) {
  EXPECT_EQ(refusal("node=n1 job=1 uid=0 user=a gpus=0"),
            "GPU owner record: not one line ending in a newline");
  EXPECT_EQ(refusal("node=n1 job=1 uid=0 user=a gpus=0\nnode=n1 job=2 uid=0 user=b gpus=1\n"),
            "GPU owner record: more than one line");
  EXPECT_EQ(refusal("node=n1 job=1 uid=0 user=a\"} 99\n gpus=0\n"),
            "GPU owner record: more than one line");
  EXPECT_EQ(refusal("node=n1 job=1 uid=0 user=a\"b gpus=0\n"),
            "GPU owner record: user 'a\"b' is not a user name");
  EXPECT_EQ(refusal("node=n1 job=1 uid=0 user=a\\b gpus=0\n"),
            "GPU owner record: user 'a\\b' is not a user name");
  EXPECT_EQ(refusal("node=../x job=1 uid=0 user=a gpus=0\n").substr(0, 40),
            "GPU owner record: node '../x' is not a n");
  EXPECT_EQ(refusal("node=n1 job=0 uid=0 user=a gpus=0\n"), "GPU owner record: job 0");
  EXPECT_EQ(refusal("node=n1 job=-1 uid=0 user=a gpus=0\n"),
            "GPU owner record: job or uid: not a number");
  EXPECT_EQ(refusal("node=n1 job=99999999999 uid=0 user=a gpus=0\n"),
            "GPU owner record: job or uid: not a number");
  EXPECT_EQ(refusal("node=n1 job=4294967296 uid=0 user=a gpus=0\n"),
            "GPU owner record: job or uid: out of range");
  EXPECT_EQ(refusal("node=n1 uid=0 job=1 user=a gpus=0\n"),
            "GPU owner record: expected job=... as field 2");
  EXPECT_EQ(refusal("node=n1 job=1 uid=0 user=a gpus=0 extra=1\n"),
            "GPU owner record: expected account=... as field 6");
  EXPECT_EQ(refusal("node=n1 job=1 uid=0 user=a gpus=0 account=x extra=1\n"),
            "GPU owner record: more than six fields");
  EXPECT_EQ(refusal("node=n1 job=1 uid=0 user=a gpus=0 account=x\"}\n"),
            "GPU owner record: account 'x\"}' is not an account name");
  EXPECT_EQ(refusal("node=n1 job=1 uid=0 user=a gpus=\n"), "GPU owner record: no GPUs");
  EXPECT_EQ(refusal("node=n1 job=1 uid=0 user=a gpus=0,0\n"), "GPU list '0,0': GPU 0 given twice");
  EXPECT_EQ(refusal(std::string(5000, 'x') + "\n"), "GPU owner record: longer than 4096 bytes");
  EXPECT_EQ(refusal(""), "GPU owner record: not one line ending in a newline");
}

TEST(GpuOwner, ReadsSlurmsGpuList) {
  EXPECT_EQ(parse_gpu_index_list("0,1,3"), (std::vector<unsigned>{0, 1, 3}));
  EXPECT_EQ(parse_gpu_index_list(""), std::vector<unsigned>{});
  for (const char* bad : {"0-3", "0,", ",1", "1024", " 1", "a", "0,,1"}) {
    EXPECT_THROW(parse_gpu_index_list(bad), InputError) << bad;
  }
  try {
    parse_gpu_index_list("0-3");
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "GPU list '0-3': expected GPU indices 0-1023 separated by commas");
  }
}

}  // namespace
}  // namespace dl
