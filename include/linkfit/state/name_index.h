#pragma once

// NameIndex: node name -> position, the lookup filter and prioritize make for every name
// kube-scheduler sends (DESIGN.md §11: 1,000-5,000 per request). An open-addressing hash table
// with linear probing and a power-of-two capacity kept at most half full; each 16-byte slot holds
// the name's hash tag, its position and where its bytes lie in one contiguous arena, so a lookup
// reads one slot and one name and never divides (std::unordered_map chases a node pointer per
// probe and divides by a prime).
//
// Names are only ever added: the cache rebuilds the index when it removes a node.
//
// Thread-safety: const methods may be called concurrently; Insert needs exclusive access.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace linkfit::state {

class NameIndex {
 public:
  static constexpr std::size_t kNotFound = static_cast<std::size_t>(-1);

  // Returns the position recorded for `name`, or kNotFound.
  std::size_t Find(std::string_view name) const;

  // Records `name` at `position`. REQUIRES: `name` is not in the index.
  void Insert(std::string_view name, std::size_t position);

  std::size_t size() const { return size_; }

 private:
  struct Slot {
    std::uint32_t tag = 0;       // high half of the hash
    std::uint32_t position = 0;  // position + 1; 0 marks an empty slot
    std::uint32_t offset = 0;    // the name in arena_
    std::uint32_t length = 0;
  };
  static std::uint64_t Hash(std::string_view name);
  void Grow();

  std::vector<Slot> slots_;
  std::string arena_;
  std::size_t size_ = 0;
};

}  // namespace linkfit::state
