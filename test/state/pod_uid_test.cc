#include "linkfit/state/pod_uid.h"

#include <gtest/gtest.h>

#include <string>
#include <unordered_set>
#include <utility>

namespace linkfit::state {
namespace {

TEST(PodUidTest, EveryTextRoundTrips) {
  for (const std::string text :
       {"8e6b0c1a-3f2d-4c5b-9a7e-0123456789ab",  // RFC 4122 v4: packed
        "00000000-0000-4000-8000-100000000042", "ffffffff-ffff-ffff-bfff-ffffffffffff",
        "8E6B0C1A-3F2D-4C5B-9A7E-0123456789AB",  // upper case: kept as text
        "8e6b0c1a-3f2d-4c5b-1a7e-0123456789ab",  // NCS variant: kept as text
        "8e6b0c1a-3f2d-4c5b-ca7e-0123456789ab",  // Microsoft variant: kept as text
        "8e6b0c1a-3f2d-4c5b-9a7e-0123456789a",   // one digit short
        "8e6b0c1a-3f2d-4c5b-9a7e-0123456789abc", "8e6b0c1a_3f2d-4c5b-9a7e-0123456789ab", "p1",
        "uid-1", "", "a pod UID that is much longer than any small-string buffer"}) {
    const PodUid uid(text);
    EXPECT_EQ(uid.str(), text);
    EXPECT_EQ(uid.empty(), text.empty()) << text;
  }
}

TEST(PodUidTest, EqualityAndHashFollowTheText) {
  const std::string a = "8e6b0c1a-3f2d-4c5b-9a7e-0123456789ab";
  const std::string b = "8e6b0c1a-3f2d-4c5b-9a7e-0123456789ac";
  EXPECT_EQ(PodUid(a), PodUid(a));
  EXPECT_EQ(PodUid(a).Hash(), PodUid(a).Hash());
  EXPECT_FALSE(PodUid(a) == PodUid(b));
  EXPECT_FALSE(PodUid(a) == PodUid("8E6B0C1A-3F2D-4C5B-9A7E-0123456789AB"));
  EXPECT_EQ(PodUid("p1"), PodUid("p1"));
  EXPECT_EQ(PodUid("p1").Hash(), PodUid("p1").Hash());
  EXPECT_FALSE(PodUid("p1") == PodUid("p2"));
  EXPECT_FALSE(PodUid("p1") == PodUid());
  EXPECT_EQ(PodUid(""), PodUid());
}

TEST(PodUidTest, CopiesAndMovesOwnTheirText) {
  PodUid text("a pod UID that is much longer than any small-string buffer");
  PodUid packed("8e6b0c1a-3f2d-4c5b-9a7e-0123456789ab");
  PodUid copy = text;
  EXPECT_EQ(copy, text);
  copy = packed;
  EXPECT_EQ(copy, packed);
  copy = text;
  PodUid moved = std::move(copy);
  EXPECT_EQ(moved, text);
  PodUid& self = moved;
  moved = self;
  EXPECT_EQ(moved.str(), text.str());
  moved = std::move(packed);
  EXPECT_EQ(moved.str(), "8e6b0c1a-3f2d-4c5b-9a7e-0123456789ab");
}

TEST(PodUidTest, KeysAHashSet) {
  std::unordered_set<PodUid, PodUid::Hasher> uids;
  for (int i = 0; i < 1000; ++i) {
    uids.insert(PodUid("00000000-0000-4000-8000-" + std::to_string(100000000000 + i)));
    uids.insert(PodUid("pod-" + std::to_string(i)));
  }
  EXPECT_EQ(uids.size(), 2000u);
  EXPECT_EQ(uids.count(PodUid("00000000-0000-4000-8000-100000000999")), 1u);
  EXPECT_EQ(uids.count(PodUid("pod-999")), 1u);
  EXPECT_EQ(uids.count(PodUid("pod-1000")), 0u);
}

}  // namespace
}  // namespace linkfit::state
