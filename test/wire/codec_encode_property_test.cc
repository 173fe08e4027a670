// Property tests of the extender reply encoders (codec_encode.cc): on random inputs, their bytes
// must equal those of the plain reference encoders (encode_reference.h).

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "linkfit/common/json_escape.h"
#include "linkfit/common/json_string.h"
#include "linkfit/wire/codec.h"
#include "wire/encode_reference.h"

namespace linkfit::wire {
namespace {

// ---------------------------------------------------------------------------------------------
// AppendJsonString

TEST(EncodePropertyTest, AppendJsonStringMatchesReference) {
  RandomText random(20261125);
  for (int round = 0; round < 20000; ++round) {
    const std::size_t clean_odds = 1 + random.Below(40);
    const std::string text = random.Text(random.Below(70), clean_odds);
    std::string out = round % 2 == 0 ? "" : "prefix:";
    const std::string before = out;
    json::AppendString(out, text);
    ASSERT_EQ(out, before + ReferenceJsonString(text)) << "text of " << text.size() << " bytes";
    // The writer of everything off the hot path (error bodies, records) writes the same bytes.
    std::string plain = before;
    json::AppendString(plain, text);
    ASSERT_EQ(plain, out) << "text of " << text.size() << " bytes";
  }
}

// Every pair of byte values side by side, in strings that take each path of the word-at-a-time
// scan: shorter than a word, in the first word, straddling two words, in the overlapping last
// word, and right after a byte that needs an escape.
TEST(EncodePropertyTest, AppendJsonStringEveryBytePair) {
  struct Shape {
    std::string text;
    std::size_t at;
  };
  const std::vector<Shape> shapes = {{"ab", 0},
                                     {"abc", 0},
                                     {"abc", 1},
                                     {"abcde", 2},
                                     {"abcdefghij", 0},
                                     {"abcdefghij", 7},
                                     {"abcdefghijklm", 11},
                                     {"a<cdefghijklm", 2},
                                     {"abcdefghij\"lmn", 11}};
  for (const Shape& shape : shapes) {
    std::string text = shape.text;
    for (int first = 0; first < 256; ++first) {
      for (int second = 0; second < 256; ++second) {
        text[shape.at] = static_cast<char>(first);
        text[shape.at + 1] = static_cast<char>(second);
        std::string out;
        json::AppendString(out, text);
        ASSERT_EQ(out, ReferenceJsonString(text))
            << shape.text << " with bytes " << first << ", " << second << " at " << shape.at;
        ASSERT_EQ(json::Quote(text), out)
            << shape.text << " with bytes " << first << ", " << second << " at " << shape.at;
      }
    }
  }
}

// json::NeedsJsonEscape (what the decoder asks of every node name, and what decides whether a
// string is copied as it is) on every byte value at every position of clean strings of 1 to 70
// bytes, which covers each path of its scan (below a word, two overlapping words, vector blocks
// with the overlapping last one); and never a byte outside the view.
TEST(EncodePropertyTest, NeedsJsonEscapeMarksExactlyTheBytesGoEscapes) {
  const auto escaped = [](int byte) {
    return byte < 0x20 || byte >= 0x80 || byte == '"' || byte == '\\' || byte == '<' ||
           byte == '>' || byte == '&';
  };
  EXPECT_FALSE(json::NeedsJsonEscape(""));
  for (std::size_t size = 1; size <= 70; ++size) {
    // Special bytes just outside the view must not count.
    std::string buffer = "<" + std::string(size, 'a') + "\\";
    const std::string_view view(buffer.data() + 1, size);
    ASSERT_FALSE(json::NeedsJsonEscape(view)) << size << " clean bytes";
    for (std::size_t at = 0; at < size; ++at) {
      for (int byte = 0; byte < 256; ++byte) {
        buffer[1 + at] = static_cast<char>(byte);
        ASSERT_EQ(json::NeedsJsonEscape(view), escaped(byte))
            << "byte " << byte << " at " << at << " of " << size;
      }
      buffer[1 + at] = 'a';
    }
  }
}

// ---------------------------------------------------------------------------------------------
// EncodeFilterResult

// Fills `failures` with `count` failures named from `names` (some repeated) and reasons from
// `reasons`.
void AddFailures(RandomText& random, std::size_t count, std::size_t clean_odds,
                 const std::vector<std::string_view>& reasons, std::vector<std::string>& names,
                 std::vector<NodeFailure>& failures) {
  const std::size_t first = names.size();
  for (std::size_t i = 0; i < count; ++i) names.push_back(random.Name(names, clean_odds));
  // Views are taken only now: `names` must not grow while they are in use.
  for (std::size_t i = first; i < names.size(); ++i) {
    failures.push_back({names[i], reasons[random.Below(reasons.size())]});
  }
}

TEST(EncodePropertyTest, FilterResultMatchesReference) {
  RandomText random(424242);
  // Around the comparison sort / radix sort boundary and well past it.
  const std::vector<std::size_t> sizes = {0, 1, 2, 3, 7, 20, 63, 64, 65, 150, 700, 3000};
  for (int round = 0; round < 400; ++round) {
    const std::size_t clean_odds = random.OneIn(3) ? 1000000 : 1 + random.Below(30);
    FilterResult result;
    // Reasons: kept ones, some with equal text but their own storage, and literals; sometimes
    // more distinct ones than the encoder remembers.
    std::vector<std::string_view> reasons = {"node(s) didn't match Pod's node affinity",
                                             "3 free GPUs, 4 requested"};
    const std::size_t kept = 1 + random.Below(random.OneIn(4) ? 20 : 4);
    for (std::size_t i = 0; i < kept; ++i) {
      reasons.push_back(result.Keep(random.OneIn(4) ? std::string(reasons[reasons.size() - 1])
                                                    : random.Text(random.Below(50), 4)));
    }
    // A view of the start of a kept reason: the same address, another size.
    reasons.push_back(reasons.back().substr(0, reasons.back().size() / 2));
    std::vector<std::string> failed_names;
    std::vector<std::string> unresolvable_names;
    std::vector<std::string> passing_names;
    failed_names.reserve(3000);
    unresolvable_names.reserve(3000);
    AddFailures(random, sizes[random.Below(sizes.size())], clean_odds, reasons, failed_names,
                result.failed_nodes);
    AddFailures(random, sizes[random.Below(sizes.size() - 3)], clean_odds, reasons,
                unresolvable_names, result.failed_and_unresolvable_nodes);
    const std::size_t passing = random.Below(40);
    for (std::size_t i = 0; i < passing; ++i) {
      passing_names.push_back(random.Name(passing_names, clean_odds));
    }
    const std::size_t list = random.Below(3);
    result.list = list == 0   ? NodeListKind::kNames
                  : list == 1 ? NodeListKind::kObjects
                              : NodeListKind::kNone;
    for (const std::string& name : passing_names) {
      result.node_names.push_back(name);
      result.nodes_json.push_back(name);  // echoed as they are, whatever they hold
    }
    if (random.OneIn(3)) result.error = random.Text(random.Below(40), 3);
    if (random.OneIn(2)) {
      // Ranks as the extender's name index gives them: over a superset of the names, equal for
      // equal names, in byte order; sometimes one failure has none (an unknown node).
      std::vector<std::string> all(failed_names);
      all.insert(all.end(), unresolvable_names.begin(), unresolvable_names.end());
      for (int extra = 0; extra < 20; ++extra) all.push_back(random.Name(all, clean_odds));
      std::sort(all.begin(), all.end());
      all.erase(std::unique(all.begin(), all.end()), all.end());
      const auto rank = [&all](std::string_view name) {
        return static_cast<std::uint32_t>(std::lower_bound(all.begin(), all.end(), name) -
                                          all.begin());
      };
      for (auto* failures : {&result.failed_nodes, &result.failed_and_unresolvable_nodes}) {
        for (NodeFailure& failure : *failures) failure.order = rank(failure.node);
        if (!failures->empty() && random.OneIn(5)) {
          (*failures)[random.Below(failures->size())].order = NodeFailure::kUnordered;
        }
      }
    }
    const std::string encoded = EncodeFilterResult(result);
    const std::string expected = ReferenceFilterResult(result);
    ASSERT_EQ(encoded, expected) << "round " << round << ": " << result.failed_nodes.size()
                                 << " failed, " << result.failed_and_unresolvable_nodes.size()
                                 << " unresolvable";
  }
}

// node-00000 .. node-N in a random order with repeats: the names differ only past the common
// prefix "node-0", in the sort key's first bytes.
TEST(EncodePropertyTest, FilterResultDenseNumberedNames) {
  RandomText random(7);
  for (const std::size_t count : std::vector<std::size_t>{10, 64, 100, 5000}) {
    std::vector<std::string> names;
    for (std::size_t i = 0; i < count; ++i) {
      const std::string digits = std::to_string(i);
      names.push_back("node-" + std::string(5 - digits.size(), '0') + digits);
    }
    for (std::size_t i = 0; i < count / 10; ++i) names.push_back(names[random.Below(count)]);
    std::shuffle(names.begin(), names.end(), random.engine());
    FilterResult result;
    const std::string_view reasons[] = {result.Keep("3 free GPUs, 4 requested"),
                                        result.Keep("1 free GPUs, 4 requested"),
                                        result.Keep("node is cordoned <maintenance>")};
    for (const std::string& name : names) {
      result.failed_nodes.push_back({name, reasons[random.Below(3)]});
    }
    ASSERT_EQ(EncodeFilterResult(result), ReferenceFilterResult(result)) << count << " names";
  }
}

// Failures ranked as the extender's name index ranks them (equal names equal ranks, byte order),
// with repeats, the ranks either dense over the names (sorted by placing each at its rank) or
// spread far wider than the failures (sorted by a radix sort): both orders are the reference's.
TEST(EncodePropertyTest, FilterResultRankedDenseOrSpread) {
  RandomText random(13);
  for (const std::uint32_t spread : std::vector<std::uint32_t>{1, 3, 100'000}) {
    for (const std::size_t count : std::vector<std::size_t>{1, 40, 700, 5000}) {
      std::vector<std::string> all;  // every name of the "index", in byte order
      for (std::size_t i = 0; i < 2 * count; ++i) all.push_back("n" + std::to_string(i));
      std::sort(all.begin(), all.end());
      std::vector<std::size_t> failing;
      for (std::size_t i = 0; i < count; ++i) failing.push_back(random.Below(all.size()));
      FilterResult result;
      const std::string_view reasons[] = {result.Keep("3 free GPUs, 4 requested"),
                                          result.Keep("node is cordoned")};
      for (const std::size_t at : failing) {
        result.failed_nodes.push_back(
            {all[at], reasons[random.Below(2)], static_cast<std::uint32_t>(at) * spread});
      }
      ASSERT_EQ(EncodeFilterResult(result), ReferenceFilterResult(result))
          << count << " failures, ranks spread " << spread;
    }
  }
}

// A reply given as marks (EncodeRankedFilterReply) is written as the same reply given as lists:
// random names (some needing escapes, written escaped or, when the request says none does, as
// they are), sent in a random order, some twice; each passing, failing or unresolvable; reasons
// with escapes, more than the lists' writer remembers at once.
TEST(EncodePropertyTest, RankedFilterReplyMatchesReference) {
  RandomText random(515151);
  for (int round = 0; round < 300; ++round) {
    const std::size_t clean_odds = random.OneIn(3) ? 1000000 : 1 + random.Below(30);
    std::vector<std::string> known;  // the caller's index, in byte order: rank = place
    const std::size_t count = random.Below(random.OneIn(4) ? 3000 : 70);
    for (std::size_t i = 0; i < count; ++i) known.push_back(random.Name(known, clean_odds));
    std::sort(known.begin(), known.end());
    known.erase(std::unique(known.begin(), known.end()), known.end());
    std::vector<std::string> reasons;
    const std::size_t distinct = 1 + random.Below(random.OneIn(4) ? 40 : 4);
    for (std::size_t i = 0; i < distinct; ++i) reasons.push_back(random.Text(random.Below(50), 4));
    const std::vector<std::string_view> reason_views(reasons.begin(), reasons.end());
    // Each known name's verdict: 0 passes, 1 fails, 2 fails unresolvable; and its reason.
    std::vector<int> verdict(known.size());
    std::vector<std::uint16_t> reason(known.size());
    for (std::size_t r = 0; r < known.size(); ++r) {
      verdict[r] = static_cast<int>(random.Below(3));
      reason[r] = static_cast<std::uint16_t>(random.Below(reasons.size()));
    }
    std::vector<std::size_t> sent;  // the request: ranks of known names, some twice, shuffled
    for (std::size_t r = 0; r < known.size(); ++r) {
      if (!random.OneIn(5)) sent.push_back(r);
      if (random.OneIn(10)) sent.push_back(r);
    }
    std::shuffle(sent.begin(), sent.end(), random.engine());
    std::vector<std::string_view> names;
    for (const std::size_t r : sent) names.push_back(known[r]);
    // Said only of a request whose names need no escape (what the decoder finds).
    const bool escape_free =
        random.OneIn(2) && std::none_of(names.begin(), names.end(), json::NeedsJsonEscape);
    // As marks.
    const std::size_t words = (known.size() + 63) / 64;
    std::vector<std::uint64_t> passing((names.size() + 63) / 64);
    std::vector<std::uint64_t> failing(words);
    std::vector<std::uint64_t> at_rank(known.size());
    // As lists.
    FilterResult lists;
    lists.names_escape_free = escape_free;
    for (std::size_t i = 0; i < names.size(); ++i) {
      const std::size_t r = sent[i];
      if (verdict[r] == 0) {
        passing[i / 64] |= std::uint64_t{1} << (i % 64);
        lists.node_names.push_back(names[i]);
        continue;
      }
      failing[r / 64] |= std::uint64_t{1} << (r % 64);
      at_rank[r] = RankedFilterReply::AtRank(static_cast<std::uint32_t>(i), reason[r],
                                             /*unresolvable=*/verdict[r] == 2);
      (verdict[r] == 1 ? lists.failed_nodes : lists.failed_and_unresolvable_nodes)
          .push_back({names[i], reason_views[reason[r]], static_cast<std::uint32_t>(r)});
    }
    RankedFilterReply marks;
    marks.names = names;
    marks.names_escape_free = escape_free;
    marks.passing = passing;
    marks.failing = failing;
    marks.at_rank = at_rank.data();
    marks.reasons = reason_views;
    ASSERT_EQ(EncodeRankedFilterReply(marks), ReferenceFilterResult(lists))
        << "round " << round << ": " << names.size() << " names";
  }
}

// Pools of nodes, as clusters name them: long pool prefixes that differ early, then unpadded
// numbers (n1 < n10 < n100 < n2 in bytes), in a random order with repeats. Names tie on their
// first sort key within a pool and are sorted again further on.
TEST(EncodePropertyTest, FilterResultPoolsOfNumberedNames) {
  RandomText random(11);
  const std::vector<std::string> pools = {"dgx-a100-pool-7f3c2-n", "dgx-h100-pool-1b9e4-n",
                                          "dgx-a100-pool-7f3c2-n1", "l40s-pool-2e8d5-n", "l"};
  for (const std::size_t count : std::vector<std::size_t>{30, 700, 5000}) {
    std::vector<std::string> names;
    for (std::size_t i = 0; i < count; ++i) {
      names.push_back(pools[random.Below(pools.size())] + std::to_string(random.Below(count)));
    }
    std::shuffle(names.begin(), names.end(), random.engine());
    FilterResult result;
    const std::string_view reasons[] = {result.Keep("3 free GPUs, 4 requested"),
                                        result.Keep("node has 8 GPUs, 16 requested")};
    for (const std::string& name : names) {
      (random.Below(2) == 0 ? result.failed_nodes : result.failed_and_unresolvable_nodes)
          .push_back({name, reasons[random.Below(2)]});
    }
    ASSERT_EQ(EncodeFilterResult(result), ReferenceFilterResult(result)) << count << " names";
  }
}

// ---------------------------------------------------------------------------------------------
// EncodeHostPriorityList

TEST(EncodePropertyTest, HostPriorityListMatchesReference) {
  RandomText random(99);
  const std::vector<std::int64_t> edges = {0,
                                           1,
                                           9,
                                           10,
                                           11,
                                           -1,
                                           -10,
                                           99,
                                           100,
                                           140,
                                           999,
                                           1000,
                                           1001,
                                           -999,
                                           std::numeric_limits<std::int64_t>::max(),
                                           std::numeric_limits<std::int64_t>::min()};
  for (int round = 0; round < 300; ++round) {
    const std::size_t clean_odds = random.OneIn(2) ? 1000000 : 1 + random.Below(30);
    std::vector<std::string> hosts;
    const std::size_t count = random.OneIn(10) ? 2000 : random.Below(30);
    for (std::size_t i = 0; i < count; ++i) hosts.push_back(random.Name(hosts, clean_odds));
    std::vector<HostPriority> priorities;
    for (const std::string& host : hosts) {
      const std::int64_t score = random.OneIn(4)
                                     ? edges[random.Below(edges.size())]
                                     : static_cast<std::int64_t>(random.engine()()) - (1LL << 31);
      // Scores of 0..10, of up to three digits (linkfit's score_range is 140), or any.
      const std::int64_t modulus = random.OneIn(2) ? 11 : 1001;
      priorities.push_back({host, random.OneIn(3) ? score : score % modulus});
    }
    ASSERT_EQ(EncodeHostPriorityList(priorities), ReferenceHostPriorityList(priorities))
        << "round " << round;
  }
}

// The decoder finds which requests' names need no escape (ExtenderArgs::node_names_escape_free)
// so that replies write them without a look; on random names, clean or not, written as Go writes
// them or with a needless \u escape, the replies must still be the reference's bytes, and clean
// requests must be found clean.
TEST(EncodePropertyTest, NamesDecodedEscapeFreeAreWrittenAsTheReferenceWrites) {
  RandomText random(2024);
  int found_clean = 0;
  for (int round = 0; round < 300; ++round) {
    const std::size_t clean_odds = random.OneIn(2) ? 1000000 : 1 + random.Below(80);
    std::vector<std::string> names;
    const std::size_t count = random.OneIn(10) ? 2000 : 1 + random.Below(40);
    for (std::size_t i = 0; i < count; ++i) {
      // A third of the requests hold DNS names only, as real clusters do.
      names.push_back(round % 3 == 0 ? random.Text(1 + random.Below(60), 1000000)
                                     : random.Name(names, clean_odds));
    }
    bool clean = true;  // no byte the fast encoders check (non-ASCII included), as Go writes it
    std::string body = R"({"Pod":{"metadata":{"name":"p","uid":"u"}},"Nodes":null,"NodeNames":[)";
    const bool needless_escape = random.OneIn(6);
    bool escaped_one = false;
    for (std::size_t i = 0; i < names.size(); ++i) {
      std::string token = ReferenceJsonString(names[i]);
      clean = clean && token == '"' + names[i] + '"' &&
              std::all_of(names[i].begin(), names[i].end(),
                          [](char c) { return static_cast<unsigned char>(c) < 0x80; });
      if (needless_escape && !escaped_one && token.size() > 2 && token[1] >= 'a' &&
          token[1] <= 'z') {
        static constexpr char kHex[] = "0123456789abcdef";
        const auto byte = static_cast<unsigned char>(token[1]);
        token = std::string("\"\\u00") + kHex[byte >> 4] + kHex[byte & 15] + token.substr(2);
        escaped_one = true;
      }
      body += (i > 0 ? "," : "") + token;
    }
    body += "]}";
    Result<ExtenderArgs> args = DecodeExtenderArgs(body);
    ASSERT_TRUE(args) << args.error().message;
    ASSERT_EQ(args->node_names.size(), names.size());
    EXPECT_EQ(args->node_names_escape_free, clean && !escaped_one) << "round " << round;
    found_clean += args->node_names_escape_free ? 1 : 0;
    std::vector<HostPriority> priorities;
    FilterResult result;
    result.list = NodeListKind::kNames;
    result.names_escape_free = args->node_names_escape_free;
    for (std::size_t i = 0; i < args->node_names.size(); ++i) {
      priorities.push_back({args->node_names[i], static_cast<std::int64_t>(i % 11)});
      if (i % 2 == 0) {
        result.node_names.push_back(args->node_names[i]);
      } else {
        result.failed_nodes.push_back({args->node_names[i], "3 free GPUs, 4 requested"});
      }
    }
    ASSERT_EQ(EncodeHostPriorityList(priorities, args->node_names_escape_free),
              ReferenceHostPriorityList(priorities))
        << "round " << round;
    ASSERT_EQ(EncodeFilterResult(result), ReferenceFilterResult(result)) << "round " << round;
  }
  EXPECT_GT(found_clean, 90);  // the fast path is taken, not only the safe one
}

}  // namespace
}  // namespace linkfit::wire
