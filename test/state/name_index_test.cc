// NameIndex: every name inserted is found at its position, nothing else is, through growth;
// names that differ only in their last byte, in a NUL byte, or in length all stay apart.

#include "linkfit/state/name_index.h"

#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace linkfit::state {
namespace {

TEST(NameIndexTest, FindsExactlyWhatWasInserted) {
  std::mt19937 rng(5);
  std::vector<std::string> names = {"",         "a",         "ab",       std::string("ab\0", 3),
                                    "abcdefgh", "abcdefgh1", "abcdefgi", "abcdefghabcdefgh"};
  std::set<std::string> seen(names.begin(), names.end());
  while (names.size() < 5000) {
    std::string name = "pool-" + std::to_string(rng() % 7) + "-n" + std::to_string(rng() % 9000);
    if (rng() % 4 == 0) name += std::string(rng() % 60, static_cast<char>('a' + rng() % 26));
    if (seen.insert(name).second) names.push_back(name);
  }
  NameIndex index;
  for (std::size_t i = 0; i < names.size(); ++i) {
    index.Insert(names[i], i);
    ASSERT_EQ(index.Find(names[i]), i) << names[i];
  }
  EXPECT_EQ(index.size(), names.size());
  for (std::size_t i = 0; i < names.size(); ++i) EXPECT_EQ(index.Find(names[i]), i) << names[i];
  // Near misses: one byte more, one less, one changed.
  for (std::size_t i = 0; i < names.size(); i += 7) {
    for (std::string miss : {names[i] + "x", names[i] + std::string(1, '\0'),
                             names[i].empty() ? "?" : names[i].substr(0, names[i].size() - 1),
                             names[i].empty() ? "!" : names[i].substr(1) + "#"}) {
      if (seen.count(miss) == 0) {
        EXPECT_EQ(index.Find(miss), NameIndex::kNotFound) << miss;
      }
    }
  }
  EXPECT_EQ(NameIndex().Find("anything"), NameIndex::kNotFound);
}

}  // namespace
}  // namespace linkfit::state
