#include "linkfit/state/name_index.h"

#include <algorithm>
#include <cstring>
#include <functional>

namespace linkfit::state {

std::uint64_t NameIndex::Hash(std::string_view name) { return std::hash<std::string_view>{}(name); }

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

const std::vector<std::uint32_t>& NameIndex::Ranks() const {
  std::call_once(ranking_->once, [this] {
    std::vector<const Slot*> used;
    used.reserve(size_);
    std::uint32_t positions = 0;
    for (const Slot& slot : slots_) {
      if (slot.position == 0) continue;
      used.push_back(&slot);
      positions = std::max(positions, slot.position);  // position + 1
    }
    const auto name = [this](const Slot* slot) {
      return std::string_view(arena_.data() + slot->offset, slot->length);
    };
    std::sort(used.begin(), used.end(),
              [&name](const Slot* a, const Slot* b) { return name(a) < name(b); });
    std::vector<std::uint32_t>& ranks = ranking_->ranks;
    ranks.assign(positions, 0);
    for (std::size_t rank = 0; rank < used.size(); ++rank) {
      ranks[used[rank]->position - 1] = static_cast<std::uint32_t>(rank);
    }
  });
  return ranking_->ranks;
}

std::size_t NameIndex::Find(std::string_view name, std::uint64_t hash) const {
  if (slots_.empty()) return kNotFound;
  const auto tag = static_cast<std::uint32_t>(hash >> 32);
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot& slot = slots_[i];
    if (slot.position == 0) return kNotFound;
    if (slot.tag == tag && slot.length == name.size() &&
        std::memcmp(arena_.data() + slot.offset, name.data(), name.size()) == 0) {
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
