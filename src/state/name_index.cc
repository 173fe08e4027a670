#include "linkfit/state/name_index.h"

#include <algorithm>
#include <memory>

#include "linkfit/state/name_probe.h"

namespace linkfit::state {

using name_probe::HashOf;
using name_probe::kArenaPad;
using name_probe::KeyOf;
using name_probe::kLongName;
using name_probe::kPositionBytes;
using name_probe::Load4;
using name_probe::Probe;

std::uint64_t NameIndex::Hash(std::string_view name) { return HashOf(name); }

NameIndex::NameIndex(const NameIndex& other)
    : slots_(other.slots_), arena_(other.arena_), size_(other.size_) {}

NameIndex& NameIndex::operator=(const NameIndex& other) {
  if (this != &other) {
    slots_ = other.slots_;
    arena_ = other.arena_;
    size_ = other.size_;
    ranking_ = std::make_unique<Ranking>();
  }
  return *this;
}

std::string_view NameIndex::NameOf(const Slot& slot) const {
  const char* bytes = arena_.data() + slot.offset + kPositionBytes;
  std::size_t length = slot.key & 0xFFu;
  if (length == kLongName) {
    length = Load4(bytes);
    bytes += sizeof(std::uint32_t);
  }
  return {bytes, length};
}

std::uint32_t NameIndex::PositionOf(const Slot& slot) const {
  return static_cast<std::uint32_t>(Load4(arena_.data() + slot.offset));
}

const std::vector<std::uint32_t>& NameIndex::Ranks() const {
  std::call_once(ranking_->once, [this] {
    std::vector<const Slot*> used;
    used.reserve(size_);
    std::uint32_t positions = 0;
    for (const Slot& slot : slots_) {
      if (slot.offset == 0) continue;
      used.push_back(&slot);
      positions = std::max(positions, PositionOf(slot) + 1);
    }
    std::sort(used.begin(), used.end(),
              [this](const Slot* a, const Slot* b) { return NameOf(*a) < NameOf(*b); });
    std::vector<std::uint32_t>& ranks = ranking_->ranks;
    ranks.assign(positions, 0);
    for (std::size_t rank = 0; rank < used.size(); ++rank) {
      ranks[PositionOf(*used[rank])] = static_cast<std::uint32_t>(rank);
    }
  });
  return ranking_->ranks;
}

std::size_t NameIndex::Find(std::string_view name) const {
  if (slots_.empty()) return kNotFound;
  const std::uint32_t found =
      Probe(slots_.data(), slots_.size() - 1, arena_.data(), name, HashOf(name));
  return found == 0 ? kNotFound : found - 1;
}

void NameIndex::FindAll(const std::string_view* names, std::size_t count, Found* found) const {
  ForEachPosition(names, count,
                  [found](std::size_t i, std::uint32_t position) { found[i].position = position; });
}

void NameIndex::Insert(std::string_view name, std::size_t position) {
  if ((size_ + 1) * 4 > slots_.size() * 3) Grow();
  if (arena_.empty()) arena_.assign(kArenaPad, '\0');
  const std::uint64_t hash = Hash(name);
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = hash & mask;
  while (slots_[i].offset != 0) i = (i + 1) & mask;
  slots_[i] = Slot{KeyOf(hash, name.size()), static_cast<std::uint32_t>(arena_.size())};
  const auto append4 = [this](std::size_t value) {
    const auto word = static_cast<std::uint32_t>(value);
    arena_.append(reinterpret_cast<const char*>(&word), sizeof(word));
  };
  append4(position);
  if (name.size() >= kLongName) append4(name.size());
  arena_.append(name);
  ++size_;
}

void NameIndex::Grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.empty() ? 16 : old.size() * 2, Slot{});
  const std::size_t mask = slots_.size() - 1;
  for (const Slot& slot : old) {
    if (slot.offset == 0) continue;
    std::size_t i = Hash(NameOf(slot)) & mask;
    while (slots_[i].offset != 0) i = (i + 1) & mask;
    slots_[i] = slot;
  }
}

}  // namespace linkfit::state
