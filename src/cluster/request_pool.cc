#include "linkfit/cluster/request_pool.h"

#include <functional>
#include <string>
#include <utility>

#include "linkfit/common/check.h"

namespace linkfit::cluster {

namespace {

void Mix(std::size_t& seed, std::size_t value) {
  seed ^= value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2);
}

// Every field operator== compares but CPU and memory (cleared before pooling). A field added to
// GpuRequest and left out here costs collisions, never a wrong match: lookups compare with ==.
std::size_t HashOf(const extender::GpuRequest& request) {
  std::size_t seed = 0;
  const std::hash<std::string> text;
  Mix(seed, static_cast<std::size_t>(request.kind));
  Mix(seed, static_cast<std::size_t>(request.count));
  Mix(seed, static_cast<std::size_t>(request.closeness));
  Mix(seed, static_cast<std::size_t>(request.policy));
  Mix(seed, text(request.mig_profile));
  Mix(seed, static_cast<std::size_t>(request.share_milli));
  for (const std::string& model : request.gpu_models) Mix(seed, text(model));
  Mix(seed, static_cast<std::size_t>(request.nics.count));
  Mix(seed, static_cast<std::size_t>(request.nics.milli));
  Mix(seed, static_cast<std::size_t>(request.nics.closeness));
  Mix(seed, static_cast<std::size_t>(request.nics.policy));
  Mix(seed, std::hash<alloc::NicMask>{}(request.nics.rails));
  Mix(seed, text(request.group));
  return seed;
}

}  // namespace

RequestPool::Handle& RequestPool::Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    Reset();
    slot_ = std::exchange(other.slot_, nullptr);
  }
  return *this;
}

const extender::GpuRequest& RequestPool::Handle::operator*() const { return slot_->request; }

void RequestPool::Handle::Reset() {
  Slot* slot = std::exchange(slot_, nullptr);
  if (slot != nullptr) slot->pool->Release(slot);
}

RequestPool::~RequestPool() { LINKFIT_CHECK(slots_.empty(), "a pooled request outlived its pool"); }

RequestPool::Handle RequestPool::Acquire(const extender::GpuRequest& request) {
  extender::GpuRequest pooled = request;
  pooled.cpu_milli = 0;
  pooled.memory_bytes = 0;
  const std::size_t hash = HashOf(pooled);
  auto [first, last] = slots_.equal_range(hash);
  for (auto it = first; it != last; ++it) {
    if (it->second->request == pooled) {
      ++it->second->users;
      return Handle(it->second.get());
    }
  }
  auto slot = std::make_unique<Slot>(Slot{std::move(pooled), hash, 1, this});
  Slot* raw = slot.get();
  slots_.emplace(hash, std::move(slot));
  return Handle(raw);
}

void RequestPool::Release(Slot* slot) {
  if (--slot->users > 0) return;
  auto [first, last] = slots_.equal_range(slot->hash);
  for (auto it = first; it != last; ++it) {
    if (it->second.get() == slot) {
      slots_.erase(it);
      return;
    }
  }
}

}  // namespace linkfit::cluster
