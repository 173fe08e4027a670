#pragma once

// PodUid: a pod's UID (metadata.uid) in 16 bytes, the key under which the pod store and the
// cluster cache keep a pod. Kubernetes makes every UID an RFC 4122 UUID, 36 characters of
// lower-case hex and dashes ("8-4-4-4-12"); as a std::string each copy costs 32 bytes plus a
// 48-byte heap block, and cluster mode keeps one per pod in the pod store and one per GPU pod
// in the cache's index. PodUid holds such a UID as its 128 bits, inline, with no heap block and
// no shared pool (so no lock and no lifetime to manage). Any other text (upper case, another
// UUID variant, a test's "p1") is kept in a heap string the PodUid owns, so every UID round-trips
// exactly: PodUid(text).str() == text.
//
// Representation: `hi` and `lo` are the UUID's bytes 0-7 and 8-15, big-endian. The top two bits
// of `lo` are the UUID's variant bits, `10` for RFC 4122; only such UUIDs are packed. The other
// form keeps `hi` = 0 and `lo` = the address of its std::string, whose top two bits are `00` on
// every 64-bit platform linkfit runs on (user-space addresses are below 2^56).
//
// Thread-safety: a value; const methods may be called concurrently.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace linkfit::state {

class PodUid {
 public:
  PodUid() = default;  // the empty UID
  explicit PodUid(std::string_view text);
  PodUid(const PodUid& other);
  PodUid(PodUid&& other) noexcept : hi_(other.hi_), lo_(other.lo_) { other.lo_ = 0; }
  PodUid& operator=(const PodUid& other);
  PodUid& operator=(PodUid&& other) noexcept;
  ~PodUid();

  // The UID as the API server spells it.
  std::string str() const;
  bool empty() const { return lo_ == 0; }

  friend bool operator==(const PodUid& a, const PodUid& b) {
    if (a.packed() || b.packed()) return a.hi_ == b.hi_ && a.lo_ == b.lo_;
    return a.view() == b.view();
  }
  std::size_t Hash() const;
  struct Hasher {
    std::size_t operator()(const PodUid& uid) const noexcept { return uid.Hash(); }
  };

 private:
  static constexpr std::uint64_t kVariantMask = std::uint64_t{3} << 62;
  static constexpr std::uint64_t kRfc4122 = std::uint64_t{2} << 62;
  bool packed() const { return (lo_ & kVariantMask) == kRfc4122; }
  // REQUIRES: !packed() and lo_ != 0.
  const std::string& text() const { return *reinterpret_cast<const std::string*>(lo_); }
  std::string_view view() const { return lo_ == 0 ? std::string_view() : text(); }
  void Release();

  std::uint64_t hi_ = 0;
  std::uint64_t lo_ = 0;  // 0: the empty UID (no string is kept for it)
};

}  // namespace linkfit::state
