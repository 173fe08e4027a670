// ShapeStats (scoring.h): the request shapes of the pods a PodSource knows, bucketed by CPU and
// memory, and the typical ones fragmentation weighs.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>

#include "linkfit/extender/scoring.h"

namespace linkfit::extender {

namespace {

// CPU buckets: whole cores up to 32, then 8 cores; memory buckets: powers of two GiB.
int CpuBucket(std::int64_t milli) {
  const std::int64_t cores = (std::max<std::int64_t>(0, milli) + 999) / 1000;
  if (cores <= 32) return static_cast<int>(cores);
  return static_cast<int>(32 + std::min<std::int64_t>((cores - 32 + 7) / 8, 1 << 20));
}

int MemoryBucket(std::int64_t bytes) {
  const std::int64_t gib = (std::max<std::int64_t>(0, bytes) + (std::int64_t{1} << 30) - 1) >> 30;
  int bucket = 0;
  while (bucket < 62 && (std::int64_t{1} << bucket) < gib) ++bucket;
  return gib == 0 ? -1 : bucket;
}

}  // namespace

std::optional<ShapeStats::Key> ShapeStats::KeyOf(const GpuRequest& request) {
  Key key;
  switch (request.kind) {
    case GpuRequest::Kind::kWhole:
      key.gpus = std::clamp(request.count, 1, topology::kMaxGpus);
      key.milli = 1000;
      break;
    case GpuRequest::Kind::kShared:
      key.gpus = std::clamp(request.count, 1, topology::kMaxGpus);
      key.milli = std::clamp((request.share_milli + 49) / 50, 1, 20) * 50;
      break;
    case GpuRequest::Kind::kNone:
      break;
    case GpuRequest::Kind::kMig:
      return std::nullopt;  // MIG GPUs are outside whole/share fragmentation
  }
  key.cpu_bucket = CpuBucket(request.cpu_milli);
  key.memory_bucket = MemoryBucket(request.memory_bytes);
  if (request.nics.wanted()) {
    key.nics = std::clamp(request.nics.CountFor(key.gpus), 1, topology::kMaxNics);
    key.nic_milli = std::clamp((request.nics.milli + 49) / 50, 1, 20) * 50;
  }
  for (const std::string& model : request.gpu_models) key.models += model + "|";
  return key;
}

void ShapeStats::Record(const GpuRequest& request) {
  const std::optional<Key> key = KeyOf(request);
  if (!key) return;
  MutexLock lock(mutex_);
  Tally& tally = tallies_[*key];
  if (tally.count == 0) tally.models = request.gpu_models;
  ++tally.count;
  tally.cpu_sum += static_cast<double>(request.cpu_milli);
  tally.memory_sum += static_cast<double>(request.memory_bytes);
  ++total_;
  ++changes_;
}

void ShapeStats::Remove(const GpuRequest& request) {
  const std::optional<Key> key = KeyOf(request);
  if (!key) return;
  MutexLock lock(mutex_);
  const auto it = tallies_.find(*key);
  if (it == tallies_.end() || it->second.count == 0) return;
  Tally& tally = it->second;
  --tally.count;
  tally.cpu_sum -= static_cast<double>(request.cpu_milli);
  tally.memory_sum -= static_cast<double>(request.memory_bytes);
  if (tally.count == 0) tallies_.erase(it);
  --total_;
  ++changes_;
}

ShapeList ShapeStats::Typical() const {
  MutexLock lock(mutex_);
  // Rebuilt once the counts have changed by 0.5 % (with records only, changes_ == total_).
  if (typical_ && changes_ < typical_changes_ + std::max<std::uint64_t>(1, typical_total_ / 200)) {
    return typical_;
  }
  auto typical = std::make_shared<std::vector<Shape>>();
  typical_total_ = total_;
  typical_changes_ = changes_;
  if (total_ == 0) {
    for (const auto& [gpus, milli] : {std::pair{1, 1000}, std::pair{2, 1000}, std::pair{4, 1000},
                                      std::pair{8, 1000}, std::pair{1, 500}}) {
      if (prior_ && milli != 1000) continue;
      Shape shape;
      shape.gpus = gpus;
      shape.milli = milli;
      shape.weight = prior_ ? 0.25 : 0.2;
      typical->push_back(std::move(shape));
    }
    typical_ = std::move(typical);
    return typical_;
  }
  std::vector<Shape> shapes;
  shapes.reserve(tallies_.size() + 4);
  double total = static_cast<double>(total_);
  for (const auto& [key, tally] : tallies_) {
    const double count = static_cast<double>(tally.count);
    Shape shape;
    shape.gpus = key.gpus;
    shape.milli = key.milli;
    shape.weight = count;
    shape.cpu_milli = std::llround(tally.cpu_sum / count);
    shape.memory_bytes = std::llround(tally.memory_sum / count);
    shape.gpu_models = tally.models;
    shape.nics = key.nics;
    shape.nic_milli = key.nic_milli;
    shapes.push_back(std::move(shape));
  }
  if (prior_) {
    for (int gpus : {1, 2, 4, 8}) {
      Shape shape;
      shape.gpus = gpus;
      shape.weight = 1;
      shapes.push_back(std::move(shape));
      total += 1;
    }
  }
  std::stable_sort(shapes.begin(), shapes.end(),
                   [](const Shape& a, const Shape& b) { return a.weight > b.weight; });
  double covered = 0;
  for (Shape& shape : shapes) {
    if (covered >= 0.95 * total || typical->size() >= kMaxShapes) break;
    covered += shape.weight;
    typical->push_back(std::move(shape));
  }
  for (Shape& shape : *typical) shape.weight /= covered;
  typical_ = std::move(typical);
  return typical_;
}

}  // namespace linkfit::extender
