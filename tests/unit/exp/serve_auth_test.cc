// Who dl-exp serve answers: the token (URL, cookie, header) and the Host names.
#include "exp/serve_auth.h"

#include <gtest/gtest.h>

namespace dl::exp {
namespace {

TEST(ServeAuth, TokensAre64HexDigitsAndDiffer) {
  const std::string a = new_token(), b = new_token();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos) << a;
  EXPECT_NE(a, b);
}

TEST(ServeAuth, SameTokenNeedsTheWholeToken) {
  EXPECT_TRUE(same_token("abc123", "abc123"));
  EXPECT_FALSE(same_token("abc12", "abc123"));
  EXPECT_FALSE(same_token("abc1234", "abc123"));
  EXPECT_FALSE(same_token("abc124", "abc123"));
  EXPECT_FALSE(same_token("", "abc123"));
  EXPECT_FALSE(same_token("", ""));
}

TEST(ServeAuth, CookieValueFindsItsOwnName) {
  EXPECT_EQ(token_cookie_name(8765), "dl-exp-token-8765");
  EXPECT_EQ(cookie_value("a=1; dl-exp-token-8765=xyz; b=2", "dl-exp-token-8765"), "xyz");
  EXPECT_EQ(cookie_value("dl-exp-token-8765=xyz", "dl-exp-token-8765"), "xyz");
  EXPECT_EQ(cookie_value("dl-exp-token-8766=xyz", "dl-exp-token-8765"), "");
  EXPECT_EQ(cookie_value("", "dl-exp-token-8765"), "");
  EXPECT_EQ(cookie_value("xdl-exp-token-8765=xyz;novalue", "dl-exp-token-8765"), "");
}

TEST(ServeAuth, AuthorizationTokenOrBearer) {
  EXPECT_EQ(authorization_token("token abc"), "abc");
  EXPECT_EQ(authorization_token("Bearer abc"), "abc");
  EXPECT_EQ(authorization_token("Basic YWxhZGRpbjpvcGVuc2VzYW1l"), "");
  EXPECT_EQ(authorization_token("abc"), "");
  EXPECT_EQ(authorization_token(""), "");
}

TEST(ServeAuth, HostOfStripsPortAndBrackets) {
  EXPECT_EQ(host_of("localhost:8765"), "localhost");
  EXPECT_EQ(host_of("LocalHost"), "localhost");
  EXPECT_EQ(host_of("localhost.:80"), "localhost");
  EXPECT_EQ(host_of("127.0.0.1:8765"), "127.0.0.1");
  EXPECT_EQ(host_of("[::1]:8765"), "::1");
  EXPECT_EQ(host_of("[::1]"), "::1");
  EXPECT_EQ(host_of("[::1]x"), "");
  EXPECT_EQ(host_of("evil.example:8765"), "evil.example");
  EXPECT_EQ(host_of("localhost:80x"), "");
  EXPECT_EQ(host_of("localhost:"), "");
  EXPECT_EQ(host_of(""), "");
}

TEST(ServeAuth, OnlyThisHostsNamesAreAllowed) {
  const auto names = served_host_names("127.0.0.1", "login1.cluster.example");
  EXPECT_TRUE(host_allowed("127.0.0.1:8765", names));
  EXPECT_TRUE(host_allowed("localhost:9000", names));  // an SSH tunnel's port
  EXPECT_TRUE(host_allowed("[::1]:8765", names));
  EXPECT_TRUE(host_allowed("login1:8765", names));
  EXPECT_TRUE(host_allowed("LOGIN1.cluster.example:8765", names));
  EXPECT_FALSE(host_allowed("evil.example:8765", names));  // DNS rebinding
  EXPECT_FALSE(host_allowed("localhost.evil.example", names));
  EXPECT_FALSE(host_allowed("", names));
  EXPECT_FALSE(host_allowed("login2:8765", names));
}

TEST(ServeAuth, TheBindAddressIsAllowedUnlessAWildcard) {
  EXPECT_TRUE(host_allowed("10.1.2.3:8765", served_host_names("10.1.2.3", "h")));
  EXPECT_TRUE(host_allowed("[fe80::1]:8765", served_host_names("fe80::1", "h")));
  const auto any = served_host_names("0.0.0.0", "h");
  EXPECT_FALSE(host_allowed("0.0.0.0:8765", any));
  EXPECT_TRUE(host_allowed("h:8765", any));
  EXPECT_FALSE(host_allowed("[::]:8765", served_host_names("::", "h")));
}

}  // namespace
}  // namespace dl::exp
