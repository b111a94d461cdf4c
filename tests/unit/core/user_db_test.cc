#include "core/user_db.h"

#include <gtest/gtest.h>

namespace dl {
namespace {

// No system gives this uid an entry (it is just below (uid_t)-1, "no uid").
constexpr uid_t kNobodyAtAll = 4294967290u;

TEST(UserDb, LooksUpNameAndHome) {
  const auto root = lookup_user(0);
  ASSERT_TRUE(root);
  EXPECT_EQ(root->name, "root");
  EXPECT_EQ(root->home, "/root");
}

TEST(UserDb, AnUnknownUidHasNoEntry) { EXPECT_FALSE(lookup_user(kNobodyAtAll)); }

TEST(UserDb, DescribesWithTheNameWhenThereIsOne) {
  EXPECT_EQ(describe_user(0), "root (uid 0)");
  EXPECT_EQ(describe_user(kNobodyAtAll), "uid 4294967290");
}

}  // namespace
}  // namespace dl
