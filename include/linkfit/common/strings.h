#pragma once

// Small string helpers shared by the parsers (topology documents, nvidia-smi text, config, wire).
//
// Thread-safety: pure functions.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace linkfit {

// Returns `text` without leading and trailing ASCII whitespace (space, \t, \n, \r, \f, \v).
std::string_view Trim(std::string_view text);

// Whether `c` is an ASCII digit (not locale-dependent, unlike std::isdigit).
constexpr bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Splits on `separator`; empty fields are kept ("a,,b" gives three fields).
std::vector<std::string_view> Split(std::string_view text, char separator);
// The fields view `text`: splitting a temporary string would hand back views of freed
// memory (a range-for keeps only the vector alive, not the string), so it does not compile.
template <typename Text>
requires std::is_same_v<Text, std::string> std::vector<std::string_view> Split(Text&& text,
                                                                               char separator)
= delete;

// Splits on runs of ASCII whitespace; no empty fields.
std::vector<std::string_view> SplitWhitespace(std::string_view text);
template <typename Text>
requires std::is_same_v<Text, std::string> std::vector<std::string_view> SplitWhitespace(
    Text&& text)
= delete;

// Parses a base-10 integer that must span the whole text (after trimming); nullopt otherwise.
std::optional<std::int64_t> ParseInt(std::string_view text);

// Returns a copy of `text` in ASCII lower case.
std::string ToLower(std::string_view text);
// Returns a copy of `text` in ASCII upper case.
std::string ToUpper(std::string_view text);

bool StartsWith(std::string_view text, std::string_view prefix);

// Joins integers with `separator`, e.g. {0,1,4} -> "0,1,4".
std::string JoinInts(const std::vector<int>& values, std::string_view separator = ",");
// "a,b,c" (or with another separator); "" for none.
// "1 GPU", "3 GPUs": `count` and `noun`, with an "s" unless the count is 1.
std::string Plural(int count, std::string_view noun);

std::string JoinStrings(const std::vector<std::string>& values, std::string_view separator = ",");

// Makes `text` `size` bytes long without writing the bytes it gains, for a buffer about to be
// written over: resize() zero-fills them first, a memset of the whole reply or request body
// (~230 KB and ~100 KB for 5,000 names) per call on the extender's hot path. By C++23's
// resize_and_overwrite; where the library lacks it, by resize(). REQUIRES: every gained byte is
// written before it is read (a reader that trims to what was written reads none).
inline void GrowUninitialized(std::string& text, std::size_t size) {
#if defined(__cpp_lib_string_resize_and_overwrite)
  // The size kept is `size`, not the operation's second argument: GCC 12's library passes the
  // capacity it allocated there (larger when the string grows geometrically), so returning it
  // would keep bytes never written (test ServerTest.ChunkedBodiesAreReadAndLimited saw them).
  text.resize_and_overwrite(size, [size](char*, std::size_t) { return size; });
#else
  text.resize(size);
#endif
}

// Quotes a string for an error message, shortening it to `max_length` characters.
std::string QuoteForMessage(std::string_view text, std::size_t max_length = 60);

}  // namespace linkfit
