#include "linkfit/state/pod_uid.h"

#include <functional>

namespace linkfit::state {
namespace {

// The text form keeps a pointer in `lo_` (see the header).
static_assert(sizeof(void*) == sizeof(std::uint64_t), "PodUid needs 64-bit pointers");

constexpr char kHex[] = "0123456789abcdef";
// Where the dashes of "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" are.
constexpr bool IsDash(std::size_t i) { return i == 8 || i == 13 || i == 18 || i == 23; }
constexpr std::size_t kUuidLength = 36;

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // upper case is not packed: it would not round-trip
}

// Reads a lower-case UUID into its two big-endian halves; false if `text` is not one.
bool ParseUuid(std::string_view text, std::uint64_t* hi, std::uint64_t* lo) {
  if (text.size() != kUuidLength) return false;
  std::uint64_t halves[2] = {0, 0};
  int nibble = 0;
  for (std::size_t i = 0; i < kUuidLength; ++i) {
    if (IsDash(i)) {
      if (text[i] != '-') return false;
      continue;
    }
    const int value = HexValue(text[i]);
    if (value < 0) return false;
    std::uint64_t& half = halves[nibble / 16];
    half = (half << 4) | static_cast<std::uint64_t>(value);
    ++nibble;
  }
  *hi = halves[0];
  *lo = halves[1];
  return true;
}

}  // namespace

PodUid::PodUid(std::string_view text) {
  std::uint64_t hi = 0;
  std::uint64_t lo = 0;
  if (ParseUuid(text, &hi, &lo) && (lo & kVariantMask) == kRfc4122) {
    hi_ = hi;
    lo_ = lo;
  } else if (!text.empty()) {
    lo_ = reinterpret_cast<std::uint64_t>(new std::string(text));
  }
}

PodUid::PodUid(const PodUid& other) : hi_(other.hi_), lo_(other.lo_) {
  if (!other.packed() && other.lo_ != 0) {
    lo_ = reinterpret_cast<std::uint64_t>(new std::string(other.text()));
  }
}

PodUid& PodUid::operator=(const PodUid& other) {
  if (this != &other) *this = PodUid(other);
  return *this;
}

PodUid& PodUid::operator=(PodUid&& other) noexcept {
  if (this != &other) {
    Release();
    hi_ = other.hi_;
    lo_ = other.lo_;
    other.hi_ = 0;
    other.lo_ = 0;
  }
  return *this;
}

PodUid::~PodUid() { Release(); }

void PodUid::Release() {
  if (!packed() && lo_ != 0) delete reinterpret_cast<const std::string*>(lo_);
  lo_ = 0;
}

std::string PodUid::str() const {
  if (!packed()) return std::string(view());
  std::string out(kUuidLength, '-');
  int nibble = 31;
  for (std::size_t i = kUuidLength; i-- > 0;) {
    if (IsDash(i)) continue;
    const std::uint64_t half = nibble >= 16 ? lo_ : hi_;
    out[i] = kHex[(half >> (4 * (15 - nibble % 16))) & 0xf];
    --nibble;
  }
  return out;
}

std::size_t PodUid::Hash() const {
  if (!packed()) return std::hash<std::string_view>{}(view());
  // Mixes both halves (UIDs that differ in a few digits must spread over the buckets).
  std::uint64_t h = hi_ * 0x9e3779b97f4a7c15ULL ^ lo_;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return static_cast<std::size_t>(h);
}

}  // namespace linkfit::state
