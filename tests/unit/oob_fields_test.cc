// The fields of a peer's message are input: a missing key or a malformed
// number is an oob::Error naming the key.
#include "droce/oob/fields.h"

#include <gtest/gtest.h>

#include "droce/oob/channel.h"

namespace droce::oob {
namespace {

TEST(OobFields, KeyValueTokensAfterTheLeadingWord) {
  const Fields f = parse_fields("QP i=0 qpn=0x11 len=4096 stray");
  EXPECT_EQ(f.size(), 3u);
  EXPECT_EQ(field(f, "i"), "0");
  EXPECT_EQ(field_u64(f, "qpn"), 0x11u);
  EXPECT_EQ(field_u64(f, "len"), 4096u);
}

TEST(OobFields, AValueMayBeEmptyOrContainEquals) {
  const Fields f = parse_fields("X a= b=c=d");
  EXPECT_EQ(field(f, "a"), "");
  EXPECT_EQ(field(f, "b"), "c=d");
}

TEST(OobFields, MissingKeysAndBadNumbersAreErrorsNamingTheKey) {
  const Fields f = parse_fields("QP qpn=12x psn=-1 va= big=99999999999999999999");
  auto what = [&](const char* key) {
    try {
      field_u64(f, key);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(what("rkey"), "peer message lacks 'rkey'");
  EXPECT_EQ(what("qpn"), "peer message: qpn='12x' is not a number");
  EXPECT_EQ(what("psn"), "peer message: psn='-1' is not a number");
  EXPECT_EQ(what("va"), "peer message: va='' is not a number");
  EXPECT_EQ(what("big"), "peer message: big='99999999999999999999' is not a number");
}

}  // namespace
}  // namespace droce::oob
