#include "linkfit/state/name_index.h"

#include <algorithm>
#include <memory>
#include <random>

#include "linkfit/state/name_probe.h"

namespace linkfit::state {

using name_probe::Load4;

namespace {

constexpr std::size_t kArenaPad = 4;  // so that no entry lies at offset 0 (entries_'s "none")

// One draw per process: every index (and every copy made to add names) starts from it.
std::uint64_t ProcessSeed() {
  static const std::uint64_t seed = [] {
    std::random_device device;
    return (std::uint64_t{device()} << 32) ^ device() ^ name_probe::kSeed;
  }();
  return seed;
}

// The next seed after a collision (splitmix64's step: every seed leads to a different one).
std::uint64_t NextSeed(std::uint64_t seed) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15u;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
  return z ^ (z >> 31);
}

}  // namespace

NameIndex::NameIndex() : seed_(ProcessSeed()) {}

NameIndex::NameIndex(std::uint64_t seed, int fingerprint_bits)
    : seed_(seed),
      hash_mask_(fingerprint_bits >= 64 ? ~std::uint64_t{0}
                                        : (std::uint64_t{1} << std::max(fingerprint_bits, 1)) - 1) {
}

std::uint64_t NameIndex::Hash(std::string_view name) {
  return name_probe::HashOf(name, name_probe::kSeed);
}

NameIndex::NameIndex(const NameIndex& other)
    : seed_(other.seed_),
      hash_mask_(other.hash_mask_),
      slots_(other.slots_),
      entries_(other.entries_),
      arena_(other.arena_),
      size_(other.size_),
      reseeds_(other.reseeds_),
      name_bytes_(other.name_bytes_) {}

NameIndex& NameIndex::operator=(const NameIndex& other) {
  if (this != &other) {
    seed_ = other.seed_;
    hash_mask_ = other.hash_mask_;
    slots_ = other.slots_;
    entries_ = other.entries_;
    arena_ = other.arena_;
    size_ = other.size_;
    reseeds_ = other.reseeds_;
    name_bytes_ = other.name_bytes_;
    ranking_ = std::make_unique<Ranking>();
  }
  return *this;
}

std::string_view NameIndex::NameAt(std::uint32_t position) const {
  const char* entry = arena_.data() + entries_[position];
  return {entry + sizeof(std::uint32_t), static_cast<std::size_t>(Load4(entry))};
}

const std::vector<std::uint32_t>& NameIndex::Ranks() const {
  std::call_once(ranking_->once, [this] {
    std::vector<std::uint32_t> used;
    used.reserve(size_);
    for (std::size_t position = 0; position < entries_.size(); ++position) {
      if (entries_[position] != 0) used.push_back(static_cast<std::uint32_t>(position));
    }
    std::sort(used.begin(), used.end(),
              [this](std::uint32_t a, std::uint32_t b) { return NameAt(a) < NameAt(b); });
    std::vector<std::uint32_t>& ranks = ranking_->ranks;
    ranks.assign(entries_.size(), 0);
    for (std::size_t rank = 0; rank < used.size(); ++rank) {
      ranks[used[rank]] = static_cast<std::uint32_t>(rank);
    }
  });
  return ranking_->ranks;
}

std::size_t NameIndex::Find(std::string_view name) const {
  if (slots_.empty()) return kNotFound;
  // The batch's probe, then the bytes: no two known names share a fingerprint and length
  // (Insert), so the one slot the probe finds is the only one that could hold `name`.
  const std::uint32_t found =
      name_probe::Probe(slots_.data(), slots_.size() - 1, HashOf(name), name.size());
  return found != 0 && NameAt(found - 1) == name ? found - 1 : kNotFound;
}

void NameIndex::FindAll(const std::string_view* names, std::size_t count, Found* found) const {
  ForEachPosition(names, count,
                  [found](std::size_t i, std::uint32_t position) { found[i].position = position; });
}

bool NameIndex::Place(std::uint32_t position) {
  const std::string_view name = NameAt(position);
  const std::uint64_t hash = HashOf(name);
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = hash & mask;
  for (; slots_[i].position_plus_one != 0; i = (i + 1) & mask) {
    Slot& slot = slots_[i];
    if (slot.hash != hash || slot.length != name.size()) continue;
    if (NameAt(slot.position_plus_one - 1) != name) return false;
    slot.position_plus_one = position + 1;  // the same name again (against Insert's contract)
    return true;
  }
  slots_[i] = Slot{hash, static_cast<std::uint32_t>(name.size()), position + 1};
  return true;
}

void NameIndex::Reseed() {
  bool placed = false;
  while (!placed) {
    seed_ = NextSeed(seed_);
    ++reseeds_;
    std::fill(slots_.begin(), slots_.end(), Slot{});
    placed = true;
    for (std::size_t position = 0; placed && position < entries_.size(); ++position) {
      if (entries_[position] != 0) placed = Place(static_cast<std::uint32_t>(position));
    }
  }
}

void NameIndex::Insert(std::string_view name, std::size_t position) {
  if ((size_ + 1) * 4 > slots_.size() * 3) Grow();
  if (arena_.empty()) arena_.assign(kArenaPad, '\0');
  if (entries_.size() <= position) entries_.resize(position + 1, 0);
  entries_[position] = static_cast<std::uint32_t>(arena_.size());
  const auto length = static_cast<std::uint32_t>(name.size());
  arena_.append(reinterpret_cast<const char*>(&length), sizeof(length));
  arena_.append(name);
  ++size_;
  name_bytes_.AddAll(name);
  if (!Place(static_cast<std::uint32_t>(position))) Reseed();
}

void NameIndex::Grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.empty() ? 16 : old.size() * 2, Slot{});
  const std::size_t mask = slots_.size() - 1;
  for (const Slot& slot : old) {
    if (slot.position_plus_one == 0) continue;
    std::size_t i = slot.hash & mask;
    while (slots_[i].position_plus_one != 0) i = (i + 1) & mask;
    slots_[i] = slot;
  }
}

}  // namespace linkfit::state
