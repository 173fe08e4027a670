#include "linkfit/state/name_index.h"

#include <cstring>

namespace linkfit::state {

namespace {

std::uint64_t Load8(const char* bytes) {
  std::uint64_t word;
  std::memcpy(&word, bytes, sizeof(word));
  return word;
}

// The last `count` (1-7) bytes at `bytes`, zero-extended.
std::uint64_t LoadTail(const char* bytes, std::size_t count) {
  std::uint64_t word = 0;
  std::memcpy(&word, bytes, count);
  return word;
}

// Byte equality of two names of `size` bytes, eight bytes a step (memcmp is a call).
bool Equal(const char* a, const char* b, std::size_t size) {
  std::size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    if (Load8(a + i) != Load8(b + i)) return false;
  }
  return i == size || LoadTail(a + i, size - i) == LoadTail(b + i, size - i);
}

}  // namespace

// Eight bytes a step, each word mixed in by a multiply, then splitmix64's finaliser: node names
// are 10-60 bytes, and std::hash (MurmurHash2 over bytes, behind a call) cost more than the rest
// of a lookup. The low bits pick the slot, the high half is the tag.
std::uint64_t NameIndex::Hash(std::string_view name) {
  const char* bytes = name.data();
  std::size_t left = name.size();
  std::uint64_t hash = 0x9E3779B97F4A7C15u ^ (left * 0xFF51AFD7ED558CCDu);
  for (; left >= 8; left -= 8, bytes += 8) {
    hash = (hash ^ Load8(bytes)) * 0xBF58476D1CE4E5B9u;
    hash ^= hash >> 29;
  }
  if (left > 0) hash = (hash ^ LoadTail(bytes, left)) * 0x94D049BB133111EBu;
  hash ^= hash >> 30;
  hash *= 0xBF58476D1CE4E5B9u;
  hash ^= hash >> 27;
  hash *= 0x94D049BB133111EBu;
  return hash ^ (hash >> 31);
}

std::size_t NameIndex::Find(std::string_view name) const {
  if (slots_.empty()) return kNotFound;
  const std::uint64_t hash = Hash(name);
  const auto tag = static_cast<std::uint32_t>(hash >> 32);
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot& slot = slots_[i];
    if (slot.position == 0) return kNotFound;
    if (slot.tag == tag && slot.length == name.size() &&
        Equal(arena_.data() + slot.offset, name.data(), name.size())) {
      return slot.position - 1;
    }
  }
}

void NameIndex::Insert(std::string_view name, std::size_t position) {
  if ((size_ + 1) * 2 > slots_.size()) Grow();
  const std::uint64_t hash = Hash(name);
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = hash & mask;
  while (slots_[i].position != 0) i = (i + 1) & mask;
  slots_[i] =
      Slot{static_cast<std::uint32_t>(hash >> 32), static_cast<std::uint32_t>(position + 1),
           static_cast<std::uint32_t>(arena_.size()), static_cast<std::uint32_t>(name.size())};
  arena_.append(name);
  ++size_;
}

void NameIndex::Grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.empty() ? 16 : old.size() * 2, Slot{});
  const std::size_t mask = slots_.size() - 1;
  for (const Slot& slot : old) {
    if (slot.position == 0) continue;
    const std::uint64_t hash = Hash(std::string_view(arena_.data() + slot.offset, slot.length));
    std::size_t i = hash & mask;
    while (slots_[i].position != 0) i = (i + 1) & mask;
    slots_[i] = slot;
  }
}

}  // namespace linkfit::state
