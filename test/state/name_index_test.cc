// NameIndex: every name inserted is found at its position, nothing else is, through growth;
// names that differ only in their last byte, in a NUL byte, or in length all stay apart; known
// names whose fingerprints collide are separated by a new seed.

#include "linkfit/state/name_index.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "linkfit/common/json_escape.h"

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

// The batch lookup answers what Find answers for each name, in order, known or not, on an empty
// index and on batches shorter and longer than its look-ahead.
// The index knows which bytes its names hold, and a copy keeps it: a node name (a DNS
// subdomain) holds none that a JSON reply escapes, and one name that does makes the whole index
// hold it.
TEST(NameIndexTest, KnowsTheBytesItsNamesHold) {
  const auto escapes = [](const NameIndex& index) {
    return index.name_bytes().Intersects(json::kBytesTheWriterLooksAt);
  };
  NameIndex index;
  EXPECT_EQ(index.name_bytes(), ByteSet{});
  EXPECT_FALSE(escapes(index));
  index.Insert("node-1.rack-2", 0);
  index.Insert("Node_2 with spaces/and~more", 1);
  EXPECT_FALSE(escapes(index));
  ByteSet expected;
  expected.AddAll("node-1.rack-2");
  expected.AddAll("Node_2 with spaces/and~more");
  EXPECT_EQ(index.name_bytes(), expected);
  for (const std::string odd : {"a<b", "x\"y", "back\\slash", "caf\xC3\xA9", "tab\t", "a&b"}) {
    NameIndex copy = index;
    copy.Insert(odd, 2);
    EXPECT_TRUE(escapes(copy)) << odd;
    const NameIndex copied(copy);
    EXPECT_TRUE(escapes(copied)) << odd;
    EXPECT_FALSE(escapes(index));
    copy = index;
    EXPECT_FALSE(escapes(copy));
  }
}

TEST(NameIndexTest, FindAllAnswersAsFindDoes) {
  std::mt19937 rng(11);
  NameIndex empty;
  const std::vector<std::string_view> two = {"a", "b"};
  std::vector<NameIndex::Found> positions(two.size(), NameIndex::Found{7});
  empty.FindAll(two.data(), two.size(), positions.data());
  for (const NameIndex::Found& found : positions) EXPECT_FALSE(found.known());

  NameIndex index;
  std::vector<std::string> known;
  for (int i = 0; i < 3000; ++i) {
    known.push_back("node-" + std::to_string(i) + std::string(rng() % 40, 'x'));
    index.Insert(known.back(), known.size() - 1);
  }
  for (const std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{17}, std::size_t{30},
                                  std::size_t{60}, std::size_t{5000}}) {
    std::vector<std::string> asked;
    for (std::size_t i = 0; i < count; ++i) {
      asked.push_back(rng() % 3 == 0 ? "unknown-" + std::to_string(rng() % 10000)
                                     : known[rng() % known.size()]);
    }
    const std::vector<std::string_view> views(asked.begin(), asked.end());
    std::vector<NameIndex::Found> found(count, NameIndex::Found{7});
    index.FindAll(views.data(), count, found.data());
    std::size_t unknown = 0;
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t expected = index.Find(asked[i]);
      EXPECT_EQ(found[i].position,
                expected == NameIndex::kNotFound ? NameIndex::kNoPosition : expected)
          << asked[i];
      unknown += expected == NameIndex::kNotFound ? 1 : 0;
    }
    // ForEachPosition counts the unknown names itself.
    EXPECT_EQ(index.ForEachPosition(views.data(), count, [](std::size_t, std::uint32_t) {}),
              unknown);
    EXPECT_EQ(empty.ForEachPosition(views.data(), count, [](std::size_t, std::uint32_t) {}), count);
  }
}

// The hash is one function on every build: the values below were written by the portable
// 128-bit product (unsigned __int128), which the x86-64 build replaces by a `mul` of its own, so
// that a wrong register or operand there shows here, not as a slower table.
TEST(NameIndexTest, HashIsTheSameFunctionOnEveryBuild) {
  const std::pair<std::string_view, std::uint64_t> known[] = {
      {"", 0x9EAB94DE7CB9C8ACull},
      {"a", 0x2C869DCA7441F53Cull},
      {"abc", 0xCDA1A10D96B252ABull},
      {"node", 0x6E5FEE4F871B24E0ull},
      {"node-7", 0x1314562DD2F2E29Aull},
      {"gpu-node-12", 0x3A5339841D65886Bull},
      {"0123456789abcdef", 0x5E1BAAB33C6E35D6ull},
      {"0123456789abcdef0", 0xAD8C94F87A13A8B6ull},
      {"dgx-a100-pool-7f3c2-n0", 0xB56D86DE29AFA4CAull},
      {"dgx-h100-pool-1b9e4-n4999", 0xAB4A37A463598B47ull},
      {"ip-10-0-12-34.us-west-2.compute.internal", 0x302AF3EC63000BFAull},
  };
  for (const auto& [name, hash] : known) EXPECT_EQ(NameIndex::Hash(name), hash) << name;
}

// The hash reads words, overlapping at the ends: at every length it must read the name's bytes
// and nothing around them (ASan checks the bounds; differing neighbours check the result), and
// every byte must count.
TEST(NameIndexTest, HashReadsEveryByteOfTheNameAndNothingElse) {
  for (std::size_t length = 0; length <= 70; ++length) {
    std::string name(length, 'n');
    for (std::size_t i = 0; i < length; ++i) name[i] = static_cast<char>('a' + (i * 7) % 26);
    const auto exact = std::make_unique<char[]>(length + 1);  // the name alone on the heap
    std::copy(name.begin(), name.end(), exact.get());
    const std::string padded_a = "AAAAAAAAAAAAAAAA" + name + "AAAAAAAAAAAAAAAA";
    const std::string padded_b = "BBBBBBBBBBBBBBBB" + name + "BBBBBBBBBBBBBBBB";
    const std::uint64_t hash = NameIndex::Hash(std::string_view(exact.get(), length));
    EXPECT_EQ(NameIndex::Hash(std::string_view(padded_a).substr(16, length)), hash) << length;
    EXPECT_EQ(NameIndex::Hash(std::string_view(padded_b).substr(16, length)), hash) << length;
    std::set<std::uint64_t> changed = {hash};
    for (std::size_t i = 0; i < length; ++i) {  // one byte changed: another hash
      std::string other = name;
      other[i] = static_cast<char>(other[i] ^ 0x20);
      changed.insert(NameIndex::Hash(other));
    }
    EXPECT_EQ(changed.size(), length + 1) << length;
    NameIndex index;
    index.Insert(name, 3);
    EXPECT_EQ(index.Find(std::string_view(exact.get(), length)), 3u) << length;
  }
}

// Long names (around 255 bytes, where a byte-sized length would end, and far beyond), sharing
// every byte but the last or differing only in length, stay apart, are found through growth and
// by the batch, and rank in byte order.
TEST(NameIndexTest, LongNamesStayApart) {
  std::vector<std::string> names;
  for (std::size_t length = 250; length <= 262; ++length) {
    names.push_back(std::string(length, 'n'));
    names.push_back(std::string(length - 1, 'n') + "m");
  }
  names.push_back(std::string(100000, 'x'));  // far beyond any node name: still exact
  names.push_back(std::string(99999, 'x') + "y");
  NameIndex index;
  for (std::size_t i = 0; i < names.size(); ++i) index.Insert(names[i], i);
  for (std::size_t i = 0; i < names.size(); ++i) EXPECT_EQ(index.Find(names[i]), i) << i;
  EXPECT_EQ(index.Find(std::string(249, 'n')), NameIndex::kNotFound);
  EXPECT_EQ(index.Find(std::string(263, 'n')), NameIndex::kNotFound);
  EXPECT_EQ(index.Find(std::string(255, 'n') + "x"), NameIndex::kNotFound);
  const std::vector<std::string_view> views(names.begin(), names.end());
  std::vector<NameIndex::Found> found(views.size(), NameIndex::Found{7});
  index.FindAll(views.data(), views.size(), found.data());
  for (std::size_t i = 0; i < names.size(); ++i) EXPECT_EQ(found[i].position, i);
  const std::vector<std::uint32_t>& ranks = index.Ranks();
  ASSERT_EQ(ranks.size(), names.size());
  for (std::size_t a = 0; a < names.size(); ++a) {
    for (std::size_t b = 0; b < names.size(); ++b) {
      EXPECT_EQ(ranks[a] < ranks[b], names[a] < names[b]) << a << " / " << b;
    }
  }
}

// With fingerprints cut to 12 bits, 150 names collide under most seeds: Insert must notice (the
// bytes differ), pick seeds until none collide, and leave every name found as itself by Find and
// by the batch, through growth and in a copy.
TEST(NameIndexTest, KnownNamesWhoseFingerprintsCollideGetANewSeed) {
  NameIndex index(/*seed=*/1, /*fingerprint_bits=*/12);
  std::vector<std::string> names;
  for (int i = 0; i < 150; ++i) {
    names.push_back("gpu-node-" + std::to_string(1000 + i));  // one length: collisions count
    index.Insert(names.back(), names.size() - 1);
  }
  EXPECT_GT(index.reseeds(), 0u);
  const NameIndex copy(index);
  for (const NameIndex* each : {static_cast<const NameIndex*>(&index), &copy}) {
    const std::vector<std::string_view> views(names.begin(), names.end());
    std::vector<NameIndex::Found> found(views.size());
    each->FindAll(views.data(), views.size(), found.data());
    for (std::size_t i = 0; i < names.size(); ++i) {
      EXPECT_EQ(each->Find(names[i]), i) << names[i];
      EXPECT_EQ(found[i].position, i) << names[i];
    }
  }
  // Inserting a name again (against the contract) does not hang in reseeds: the later wins.
  NameIndex again(/*seed=*/1, /*fingerprint_bits=*/12);
  again.Insert("twice", 0);
  again.Insert("twice", 1);
  EXPECT_EQ(again.Find("twice"), 1u);
}

// The batch matches a name by length and fingerprint alone; Find compares bytes. With 12-bit
// fingerprints an unknown name that shares a known one's is easy to find, and shows the
// difference that 64-bit fingerprints make negligible (name_index.h): the batch answers the
// known name's position, Find answers that the name is unknown.
TEST(NameIndexTest, TheBatchMatchesByFingerprintFindByBytes) {
  NameIndex index(/*seed=*/7, /*fingerprint_bits=*/12);
  index.Insert("gpu-node-1", 0);
  std::string twin;
  for (int i = 0; twin.empty() && i < 100000; ++i) {
    std::string candidate = "cpu-000000";  // ten bytes, as gpu-node-1
    for (int digits = i, at = 9; digits > 0; digits /= 10, --at) {
      candidate[static_cast<std::size_t>(at)] = static_cast<char>('0' + digits % 10);
    }
    NameIndex pair(/*seed=*/7, /*fingerprint_bits=*/12);
    pair.Insert("gpu-node-1", 0);
    pair.Insert(candidate, 1);
    if (pair.reseeds() > 0) twin = candidate;  // it collided with gpu-node-1 under seed 7
  }
  ASSERT_FALSE(twin.empty());
  EXPECT_EQ(index.Find(twin), NameIndex::kNotFound);
  const std::string_view asked[] = {twin, "gpu-node-1"};
  NameIndex::Found found[2];
  index.FindAll(asked, 2, found);
  EXPECT_EQ(found[0].position, 0u);
  EXPECT_EQ(found[1].position, 0u);
}

TEST(NameIndexTest, RanksFollowByteOrderAndCopiesRankAfresh) {
  const std::vector<std::string> names = {
      "node-10", "node-9", "", "Node-1", "node-1", std::string("node-1\0", 7), "\xC3\xA9", "~"};
  NameIndex index;
  for (std::size_t i = 0; i < names.size(); ++i) index.Insert(names[i], i);
  const std::vector<std::uint32_t>& ranks = index.Ranks();
  ASSERT_EQ(ranks.size(), names.size());
  for (std::size_t a = 0; a < names.size(); ++a) {
    for (std::size_t b = 0; b < names.size(); ++b) {
      EXPECT_EQ(ranks[a] < ranks[b], names[a] < names[b]) << names[a] << " / " << names[b];
    }
  }
  EXPECT_EQ(&index.Ranks(), &ranks);  // computed once
  // A copy is for adding: its ranks cover the names added to it.
  NameIndex grown(index);
  grown.Insert("node-0", names.size());
  const std::vector<std::uint32_t>& more = grown.Ranks();
  ASSERT_EQ(more.size(), names.size() + 1);
  EXPECT_EQ(more[names.size()], ranks[4] + 0u);  // "node-0" sorts where "node-1" was
  EXPECT_EQ(more[4], ranks[4] + 1);
}

}  // namespace
}  // namespace linkfit::state
