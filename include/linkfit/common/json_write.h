#pragma once

// The byte-level JSON writer of the extender replies (wire/codec_encode.cc, wire/failure_order.cc,
// json_string.cc): which bytes need care and how Go's encoding/json escapes them, found eight or
// sixteen bytes at a time; copies sized for the reply buffer; Output, the reply buffer itself;
// small decimals from a table. Everything here is inline on purpose: the encoders call it for every
// node name and score, and one translation unit per encoder keeps it inlined there
// (bench/RESULTS.md, reply encoding).
//
// Thread-safety: pure functions and per-call values.

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "linkfit/common/json_escape.h"
#include "linkfit/common/strings.h"

namespace linkfit::json_write {
// Internal linkage on purpose: GCC inlines a function with internal linkage called once more
// readily than an inline one, and the replies encode slower without it (bench/RESULTS.md, "Verbs
// in process after the 28 Nov 12:00-15:00 UTC session").
namespace {

// Bytes that cannot be copied as they are (JsonWriterLooksAt: control characters, `"`, `\`, `<`,
// `>`, `&` and every non-ASCII byte, checked as UTF-8).
inline constexpr std::array<bool, 256> MakeSpecialTable() {
  std::array<bool, 256> table{};
  for (std::size_t i = 0; i < 256; ++i) {
    table[i] = json::JsonWriterLooksAt(static_cast<unsigned char>(i));
  }
  return table;
}
inline constexpr std::array<bool, 256> kSpecial = MakeSpecialTable();

inline constexpr char kHex[] = "0123456789abcdef";

// The decimal text of 0..999 and its length, four bytes each: a reply's scores (0..score_range)
// are written as one 4-byte store and an add, with no branch on the number's magnitude (scores
// of thousands of candidates follow no pattern a branch predictor could learn; to_chars and a
// branch per digit count cost a misprediction or two per candidate).
struct SmallDecimal {
  char digits[3];
  std::uint8_t length;
};
static_assert(sizeof(SmallDecimal) == 4);
inline constexpr std::array<SmallDecimal, 1000> MakeSmallDecimals() {
  std::array<SmallDecimal, 1000> table{};
  for (int value = 0; value < 1000; ++value) {
    SmallDecimal& d = table[static_cast<std::size_t>(value)];
    if (value >= 100) {
      d = {{static_cast<char>('0' + value / 100), static_cast<char>('0' + value / 10 % 10),
            static_cast<char>('0' + value % 10)},
           3};
    } else if (value >= 10) {
      d = {{static_cast<char>('0' + value / 10), static_cast<char>('0' + value % 10), 0}, 2};
    } else {
      d = {{static_cast<char>('0' + value), 0, 0}, 1};
    }
  }
  return table;
}
inline constexpr std::array<SmallDecimal, 1000> kSmallDecimals = MakeSmallDecimals();
inline bool IsSmallDecimal(std::int64_t value) {
  return static_cast<std::uint64_t>(value) < kSmallDecimals.size();
}

inline unsigned char Byte(std::string_view s, std::size_t i) {
  return static_cast<unsigned char>(s[i]);
}

inline bool InRange(std::string_view s, std::size_t i, unsigned char lo, unsigned char hi) {
  return i < s.size() && Byte(s, i) >= lo && Byte(s, i) <= hi;
}

// Returns the length of the valid UTF-8 sequence at s[i] (a non-ASCII lead byte), or 0 when it
// is invalid, with the same rules as Go's utf8.DecodeRuneInString (no overlong forms, no
// surrogates, nothing above U+10FFFF).
inline std::size_t Utf8Length(std::string_view s, std::size_t i) {
  const unsigned char lead = Byte(s, i);
  if (lead >= 0xC2 && lead <= 0xDF) return InRange(s, i + 1, 0x80, 0xBF) ? 2 : 0;
  if (lead >= 0xE0 && lead <= 0xEF) {
    const unsigned char lo = lead == 0xE0 ? 0xA0 : 0x80;
    const unsigned char hi = lead == 0xED ? 0x9F : 0xBF;
    return InRange(s, i + 1, lo, hi) && InRange(s, i + 2, 0x80, 0xBF) ? 3 : 0;
  }
  if (lead >= 0xF0 && lead <= 0xF4) {
    const unsigned char lo = lead == 0xF0 ? 0x90 : 0x80;
    const unsigned char hi = lead == 0xF4 ? 0x8F : 0xBF;
    return InRange(s, i + 1, lo, hi) && InRange(s, i + 2, 0x80, 0xBF) &&
                   InRange(s, i + 3, 0x80, 0xBF)
               ? 4
               : 0;
  }
  return 0;
}

// --- Eight bytes at a time ---------------------------------------------------------------------

inline constexpr std::uint64_t kOnes = 0x0101010101010101;
inline constexpr std::uint64_t kLow7 = 0x7F7F7F7F7F7F7F7F;
inline constexpr std::uint64_t kHigh = 0x8080808080808080;

// Returns the 8 bytes at `p` with the byte at p[0] in the least significant position.
inline std::uint64_t LoadLittleEndian(const char* p) {
  std::uint64_t word;
  std::memcpy(&word, p, sizeof(word));
  if constexpr (std::endian::native == std::endian::big) word = __builtin_bswap64(word);
  return word;
}

// Returns the 8 bytes at `p` with the byte at p[0] in the most significant position, so that
// comparing two such words compares the bytes as memcmp does.
inline std::uint64_t LoadBigEndian(const char* p) {
  std::uint64_t word;
  std::memcpy(&word, p, sizeof(word));
  if constexpr (std::endian::native == std::endian::little) word = __builtin_bswap64(word);
  return word;
}

// Returns the high bit of each byte of `word` that equals `c`, and no other bit. The sums stay
// inside their byte (at most 0x7F + 0x7F), so no carry marks a neighbour.
constexpr std::uint64_t BytesEqualTo(std::uint64_t word, unsigned char c) {
  const std::uint64_t x = word ^ (kOnes * c);
  return ~(((x & kLow7) + kLow7) | x) & kHigh;
}

// Returns the high bit of each byte of `word` that kSpecial marks, and no other bit: bytes
// >= 0x80 (their own high bit), bytes < 0x20 ((b & 0x7F) + 0x60 stays below 0x80 exactly when
// b & 0x7F < 0x20, again without carries), `"` and `&` (0x22, 0x26: b | 0x04 == 0x26), `<` and
// `>` (0x3C, 0x3E: b | 0x02 == 0x3E) and `\`.
constexpr std::uint64_t SpecialBytes(std::uint64_t word) {
  const std::uint64_t control_or_high = (word | ~((word & kLow7) + kOnes * 0x60)) & kHigh;
  return control_or_high | BytesEqualTo(word | (kOnes * 0x04), 0x26) |
         BytesEqualTo(word | (kOnes * 0x02), 0x3E) | BytesEqualTo(word, '\\');
}

// Cheaper than SpecialBytes, with the same lowest set bit: byte - 0x20 and byte ^ c - 1 borrow
// from the next byte only where this byte is < 0x20 or equal to c, that is special, so a bit
// above the first special byte may be wrong but none below it. Zero when no byte is special.
constexpr std::uint64_t FirstSpecialByte(std::uint64_t word) {
  const std::uint64_t quote_amp = (word | (kOnes * 0x04)) ^ (kOnes * 0x26);
  const std::uint64_t angle = (word | (kOnes * 0x02)) ^ (kOnes * 0x3E);
  const std::uint64_t backslash = word ^ (kOnes * '\\');
  return (word | (word - kOnes * 0x20) | ((quote_amp - kOnes) & ~quote_amp) |
          ((angle - kOnes) & ~angle) | ((backslash - kOnes) & ~backslash)) &
         kHigh;
}

constexpr std::size_t LowestByte(std::uint64_t bits) {
  return static_cast<std::size_t>(std::countr_zero(bits)) / 8;
}

// Every byte value, alone, repeated, and between neighbours that need no escape or do.
constexpr bool WordMasksAgreeWithTable() {
  for (std::uint64_t b = 0; b < 256; ++b) {
    const std::uint64_t expected = kSpecial[b] ? kHigh : 0;
    if (SpecialBytes(kOnes * b) != expected) return false;
    if (SpecialBytes(0x6161616161616100 | b) != (expected & 0xFF)) return false;
    if (SpecialBytes(b << 56) != ((expected & 0xFF) << 56 | kHigh >> 8)) return false;
    // b alone among clean bytes, in the lowest and a middle position.
    if ((FirstSpecialByte(0x6161616161616100 | b) != 0) != kSpecial[b]) return false;
    const std::uint64_t middle = (0x6161616161616161 & ~(std::uint64_t{0xFF} << 24)) | b << 24;
    if (FirstSpecialByte(middle) != 0 && LowestByte(FirstSpecialByte(middle)) != 3) return false;
    if ((FirstSpecialByte(middle) != 0) != kSpecial[b]) return false;
  }
  return true;
}
static_assert(WordMasksAgreeWithTable());

// Returns the index of the first byte at or after `start` that kSpecial marks, or text.size().
inline std::size_t FindSpecial(std::string_view text, std::size_t start) {
  const char* data = text.data();
  const std::size_t size = text.size();
  std::size_t i = start;
  for (; i + 8 <= size; i += 8) {
    const std::uint64_t special = FirstSpecialByte(LoadLittleEndian(data + i));
    if (special != 0) return i + LowestByte(special);
  }
  if (i == size) return size;
  const std::size_t rest = size - i;  // 1..7 bytes
  std::uint64_t special;
  if (size >= start + 8) {
    // The last 8 bytes, less the 8 - rest before i that the loop found clean.
    special = FirstSpecialByte(LoadLittleEndian(data + size - 8)) >> (8 * (8 - rest));
  } else if (size >= 8) {
    // The same, but bytes before `start` may be special (one just escaped) and borrow from
    // their neighbours: the exact mask.
    special = SpecialBytes(LoadLittleEndian(data + size - 8)) >> (8 * (8 - rest));
  } else {
    char padded[8];  // the rest, then clean bytes
    std::memset(padded, 'a', sizeof(padded));
    std::memcpy(padded, data + i, rest);
    special = FirstSpecialByte(LoadLittleEndian(padded));
  }
  return special == 0 ? size : i + LowestByte(special);
}

// Returns whether any byte of `text` is one that kSpecial marks, by words (the portable way):
// whole words only, some bytes twice, and no position, so it is cheaper than FindSpecial.
inline bool HasSpecialByWords(std::string_view text) {
  const char* data = text.data();
  const std::size_t size = text.size();
  std::uint64_t special = 0;
  if (size >= 8) {
    for (std::size_t i = 0; i + 8 < size; i += 8) {
      special |= FirstSpecialByte(LoadLittleEndian(data + i));
    }
    special |= FirstSpecialByte(LoadLittleEndian(data + size - 8));  // overlaps the last word
  } else if (size >= 4) {
    std::uint32_t head;
    std::uint32_t tail;
    std::memcpy(&head, data, 4);
    std::memcpy(&tail, data + size - 4, 4);
    special = FirstSpecialByte(std::uint64_t{head} << 32 | tail);
  } else if (size > 0) {
    // Bytes 0, size / 2 and size - 1 are all of them, below five clean bytes.
    const auto byte = [data](std::size_t i) {
      return std::uint64_t{static_cast<unsigned char>(data[i])};
    };
    special =
        FirstSpecialByte(0x6161616161000000 | byte(0) << 16 | byte(size / 2) << 8 | byte(size - 1));
  }
  return special != 0;
}

#if defined(__SSE2__)
// The lanes of `v` whose byte kSpecial marks, all ones: bytes < 0x20 and >= 0x80 are exactly
// those below 0x20 as signed bytes; `"` and `&` those with b | 0x04 == 0x26, `<` and `>` those
// with b | 0x02 == 0x3E; and `\`. SSE2 is part of x86-64 itself: no dispatch needed.
inline __m128i SpecialLanes(__m128i v) {
  const __m128i control_or_high = _mm_cmplt_epi8(v, _mm_set1_epi8(0x20));
  const __m128i quote_amp =
      _mm_cmpeq_epi8(_mm_or_si128(v, _mm_set1_epi8(0x04)), _mm_set1_epi8(0x26));
  const __m128i angle = _mm_cmpeq_epi8(_mm_or_si128(v, _mm_set1_epi8(0x02)), _mm_set1_epi8(0x3E));
  const __m128i backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'));
  return _mm_or_si128(_mm_or_si128(control_or_high, quote_amp), _mm_or_si128(angle, backslash));
}

// HasSpecialByWords sixteen bytes at a time: every node name the decoder reads is looked at
// here (5,000 per request at the largest), and a name of 16-32 bytes costs two vector checks
// instead of three or four word checks of a dozen operations each. From 8 to 15 bytes, the first
// and last eight in one register; below 8, by words.
inline bool HasSpecial(std::string_view text) {
  const char* data = text.data();
  const std::size_t size = text.size();
  const auto load = [](const char* at) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(at));
  };
  if (size >= 16) {
    __m128i special = SpecialLanes(load(data + size - 16));  // overlaps the last block
    for (std::size_t i = 0; i + 16 < size; i += 16) {
      special = _mm_or_si128(special, SpecialLanes(load(data + i)));
    }
    return _mm_movemask_epi8(special) != 0;
  }
  if (size >= 8) {
    const __m128i head = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(data));
    const __m128i tail = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(data + size - 8));
    return _mm_movemask_epi8(SpecialLanes(_mm_unpacklo_epi64(head, tail))) != 0;
  }
  return HasSpecialByWords(text);
}
#else
inline bool HasSpecial(std::string_view text) { return HasSpecialByWords(text); }
#endif

// Copies n bytes, sizeof(Word) <= n <= 2 x sizeof(Word), as a head and a tail word that may
// overlap.
template <typename Word>
inline void CopyHeadAndTail(char* to, const char* from, std::size_t n) {
  Word head;
  Word tail;
  std::memcpy(&head, from, sizeof(Word));
  std::memcpy(&tail, from + n - sizeof(Word), sizeof(Word));
  std::memcpy(to, &head, sizeof(Word));
  std::memcpy(to + n - sizeof(Word), &tail, sizeof(Word));
}

// Copies n bytes. Up to 32 bytes (a node name, a number, a short reason) take a few
// overlapping loads and stores instead of a call to memcpy.
inline void CopyBytes(char* to, const char* from, std::size_t n) {
  if (n <= 16) {
    if (n >= 8) {
      CopyHeadAndTail<std::uint64_t>(to, from, n);
    } else if (n >= 4) {
      CopyHeadAndTail<std::uint32_t>(to, from, n);
    } else if (n > 0) {
      const char first = from[0];
      const char middle = from[n / 2];
      const char last = from[n - 1];
      to[0] = first;
      to[n / 2] = middle;
      to[n - 1] = last;
    }
  } else if (n <= 32) {
    std::uint64_t words[4];
    std::memcpy(&words[0], from, 16);
    std::memcpy(&words[2], from + n - 16, 16);
    std::memcpy(to, &words[0], 16);
    std::memcpy(to + n - 16, &words[2], 16);
  } else {
    std::memcpy(to, from, n);
  }
}

// Where EncodeFilterResult and EncodeHostPriorityList write their reply: a string sized ahead
// (growing geometrically when that was too little), so that each piece is a bounds check and a
// copy rather than a call into std::string::append. Take() trims it to what was written, so the
// room ahead is never read and never zero-filled (GrowUninitialized).
class Output {
 public:
  // Continues `start` with room for `room` more bytes.
  Output(std::string start, std::size_t room) : buffer_(std::move(start)), size_(buffer_.size()) {
    Resize(size_ + std::max<std::size_t>(room, 64));
  }

  std::size_t size() const { return size_; }

  void Append(const char* text, std::size_t n) {
    Reserve(n);
    CopyBytes(data_ + size_, text, n);
    size_ += n;
  }
  template <std::size_t N>
  void Literal(const char (&text)[N]) {
    Reserve(N - 1);
    std::memcpy(data_ + size_, text, N - 1);
    size_ += N - 1;
  }
  // Writes `c` over the byte written at `offset`.
  void Set(std::size_t offset, char c) { data_[offset] = c; }
  // Appends a copy of the n bytes written at `offset`.
  void AppendWritten(std::size_t offset, std::size_t n) {
    Reserve(n);                                   // first: it may move the bytes
    CopyBytes(data_ + size_, data_ + offset, n);  // offset + n <= size_: no overlap
    size_ += n;
  }
  void AppendInt(std::int64_t value) {
    if (IsSmallDecimal(value)) [[likely]] {  // every score
      // Four bytes stored, `length` kept: what lies past them is written over next or trimmed
      // by Take().
      Reserve(sizeof(SmallDecimal));
      const SmallDecimal& decimal = kSmallDecimals[static_cast<std::size_t>(value)];
      std::memcpy(data_ + size_, &decimal, sizeof(SmallDecimal));
      size_ += decimal.length;
      return;
    }
    char digits[20];
    const auto n = static_cast<std::size_t>(
        std::to_chars(digits, digits + sizeof(digits), value).ptr - digits);
    Reserve(n);  // rare (no score is this long): a plain copy, not CopyBytes's wide one
    std::memcpy(data_ + size_, digits, n);
    size_ += n;
  }

  std::string Take() && {
    buffer_.resize(size_);
    return std::move(buffer_);
  }

 private:
  void Reserve(std::size_t n) {
    if (capacity_ - size_ < n) [[unlikely]] {
      Grow(n);
    }
  }
  // Out of line, so that Reserve stays small enough to be inlined everywhere.
  [[gnu::noinline]] void Grow(std::size_t n) { Resize(std::max(2 * capacity_, size_ + n)); }
  void Resize(std::size_t capacity) {
    GrowUninitialized(buffer_, capacity);
    data_ = buffer_.data();
    capacity_ = capacity;
  }

  std::string buffer_;
  std::size_t size_ = 0;      // bytes written
  char* data_ = nullptr;      // buffer_.data()
  std::size_t capacity_ = 0;  // buffer_.size()
};

// json::AppendString's output (json_string.h): a std::string appended to.
struct StringOutput {
  void Append(const char* text, std::size_t n) { out.append(text, n); }
  std::string& out;
};

// AppendEscaped from text[i], the first byte that kSpecial marks, on.
template <typename Sink>
inline void AppendEscapedFrom(Sink& out, std::string_view text, std::size_t i) {
  std::size_t run = 0;  // start of the pending run of bytes copied as they are
  while (i < text.size()) {
    const unsigned char ch = Byte(text, i);
    std::size_t length = 1;
    if (ch >= 0x80) {
      length = Utf8Length(text, i);
      // Valid UTF-8 is copied, except U+2028 and U+2029 (E2 80 A8 / E2 80 A9).
      if (length > 0 && !(length == 3 && ch == 0xE2 && Byte(text, i + 1) == 0x80 &&
                          (Byte(text, i + 2) == 0xA8 || Byte(text, i + 2) == 0xA9))) {
        i = FindSpecial(text, i + length);
        continue;
      }
    }
    out.Append(text.data() + run, i - run);
    if (length == 0) {
      out.Append("\\ufffd", 6);
      length = 1;
    } else if (length == 3) {
      out.Append(Byte(text, i + 2) == 0xA8 ? "\\u2028" : "\\u2029", 6);
    } else if (ch == '"' || ch == '\\') {
      const char escape[2] = {'\\', static_cast<char>(ch)};
      out.Append(escape, 2);
    } else if (ch == '\n') {
      out.Append("\\n", 2);
    } else if (ch == '\r') {
      out.Append("\\r", 2);
    } else if (ch == '\t') {
      out.Append("\\t", 2);
    } else {
      const char escape[6] = {'\\', 'u', '0', '0', kHex[ch >> 4], kHex[ch & 0xF]};
      out.Append(escape, 6);
    }
    i += length;
    run = i;
    i = FindSpecial(text, i);
  }
  out.Append(text.data() + run, text.size() - run);
}

// Appends `text` escaped as json::AppendString does, without the quotes: in one piece when no
// byte needs care (the usual case), otherwise run by run.
template <typename Sink>
inline void AppendEscaped(Sink& out, std::string_view text) {
  if (HasSpecial(text)) {
    AppendEscapedFrom(out, text, FindSpecial(text, 0));
  } else {
    out.Append(text.data(), text.size());
  }
}

// A node name: as it is when the decoder found that no name of the request needs an escape
// (ExtenderArgs::node_names_escape_free), otherwise as AppendEscaped writes it.
template <typename Sink>
inline void AppendName(Sink& out, std::string_view name, bool escape_free) {
  if (escape_free) {
    out.Append(name.data(), name.size());
  } else {
    AppendEscaped(out, name);
  }
}

inline void AppendQuoted(Output& out, std::string_view text) {
  out.Literal("\"");
  AppendEscaped(out, text);
  out.Literal("\"");
}

inline void AppendInt(std::string& out, std::int64_t value) {
  char buffer[24];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out.append(buffer, result.ptr);
}

inline std::size_t DecimalLength(std::int64_t value) {
  if (IsSmallDecimal(value)) [[likely]] {
    return kSmallDecimals[static_cast<std::size_t>(value)].length;
  }
  char buffer[24];
  return static_cast<std::size_t>(std::to_chars(buffer, buffer + sizeof(buffer), value).ptr -
                                  buffer);
}

// The JSON form of the last few distinct reasons written, found by their view (the same bytes
// at the same address): failures share a handful of reasons that the FilterResult keeps once, so
// each is escaped once per reply and copied from the reply after that.
class ReasonCache {
 public:
  void Append(Output& out, std::string_view reason) {
    for (const Slot& slot : slots_) {
      if (slot.data == reason.data() && slot.size == reason.size()) {
        out.AppendWritten(slot.offset, slot.length);
        return;
      }
    }
    Slot& slot = slots_[next_];
    next_ = (next_ + 1) % slots_.size();
    slot.data = reason.data();
    slot.size = reason.size();
    slot.offset = out.size();
    AppendQuoted(out, reason);
    slot.length = out.size() - slot.offset;  // at least 2: the quotes
  }

 private:
  struct Slot {
    const char* data = nullptr;
    std::size_t size = std::string_view::npos;  // no view's size: the slot is unused
    std::size_t offset = 0;                     // of the quoted, escaped reason in the output
    std::size_t length = 0;
  };
  std::array<Slot, 8> slots_{};
  std::size_t next_ = 0;
};

}  // namespace
}  // namespace linkfit::json_write
