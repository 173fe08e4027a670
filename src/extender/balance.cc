#include "extender/balance.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace linkfit::extender {

Scarcity ScarcityOf(const std::vector<Shape>& shapes, CandidateSupply& supply) {
  double gpu_weight = 0, cpu_weight = 0, memory_weight = 0;
  for (const Shape& shape : shapes) {
    if (shape.gpus <= 0) continue;
    gpu_weight += shape.weight * shape.gpus * shape.milli / 1000.0;
    cpu_weight += shape.weight * static_cast<double>(shape.cpu_milli);
    memory_weight += shape.weight * static_cast<double>(shape.memory_bytes);
  }
  Scarcity scarcity;
  if (gpu_weight <= 0) return scarcity;
  supply.Fold();
  const auto rho = [](double demand, MedianOfFew& values) {
    if (values.empty() || demand <= 0) return 0.0;
    const double ratio = std::clamp(demand / values.Median(), 0.0, 1.0);
    return ratio * ratio;
  };
  scarcity.cpu = rho(cpu_weight / gpu_weight, supply.cpu_);
  scarcity.memory = rho(memory_weight / gpu_weight, supply.memory_);
  return scarcity;
}

void MedianOfFew::AddDistinct(std::size_t slot, double value, std::size_t times) {
  if (distinct_ < kMaxDistinct) {
    slots_[slot] = Slot{std::bit_cast<std::uint64_t>(value == 0 ? 0.0 : value), times};
    ++distinct_;
    return;
  }
  spilled_ = true;
  all_.reserve(count_ * 2);
  for (const Slot& s : slots_) {
    if (s.count != 0) all_.insert(all_.end(), s.count, std::bit_cast<double>(s.bits));
  }
  all_.insert(all_.end(), times, value);
}

void CandidateSupply::AddKind(std::size_t slot, const state::MachineKind& kind, std::size_t times) {
  if (kind_count_ < kMaxKinds) {
    kinds_[slot] =
        Kind{kind.table, kind.cpu_allocatable_milli, kind.memory_allocatable_bytes, times};
    ++kind_count_;
    return;
  }
  Fold();
  spilled_ = true;
  AddValues(kind.table, kind.cpu_allocatable_milli, kind.memory_allocatable_bytes, times);
  AddTable(kind.table);
}

void CandidateSupply::AddValues(const alloc::PlacementTable* table, std::int64_t cpu,
                                std::int64_t memory, std::size_t times) {
  const double gpus = table->gpu_count();
  if (gpus <= 0) return;
  if (cpu > 0) cpu_.Add(static_cast<double>(cpu) / gpus, times);
  if (memory > 0) memory_.Add(static_cast<double>(memory) / gpus, times);
}

void CandidateSupply::AddTable(const alloc::PlacementTable* table) {
  if (std::find(tables_.begin(), tables_.end(), table) == tables_.end()) tables_.push_back(table);
}

void CandidateSupply::Fold() {
  for (Kind& kind : kinds_) {
    if (kind.count == 0) continue;
    AddValues(kind.table, kind.cpu, kind.memory, kind.count);
    AddTable(kind.table);
    kind = Kind{};
  }
  kind_count_ = 0;
}

double MedianOfFew::Median() {
  const std::size_t middle = count_ / 2;
  if (spilled_) {
    const auto at = all_.begin() + static_cast<std::ptrdiff_t>(middle);
    std::nth_element(all_.begin(), at, all_.end());
    return *at;
  }
  std::array<std::pair<double, std::size_t>, kMaxDistinct> distinct{};
  std::size_t n = 0;
  for (const Slot& s : slots_) {
    if (s.count != 0) distinct[n++] = {std::bit_cast<double>(s.bits), s.count};
  }
  std::sort(distinct.begin(), distinct.begin() + static_cast<std::ptrdiff_t>(n));
  std::size_t below = 0;  // values before the current distinct value in sorted order
  for (std::size_t i = 0; i < n; ++i) {
    if (middle < below + distinct[i].second) return distinct[i].first;
    below += distinct[i].second;
  }
  return distinct[n - 1].first;  // not reached: middle < count_
}

double Balance(const state::NodeState& node, const GpuRequest& request, const Scarcity& rho) {
  const double used_gpus = node.UsedGpuEquivalents();  // kept with the state
  const double gpus = node.gpu_count();
  if (gpus <= 0) return 1.0;
  const double used_before = std::min(1.0, used_gpus / gpus);
  const double used_after = std::min(1.0, (used_gpus + request.GpuEquivalents()) / gpus);
  double sum = 0;
  int known = 0;
  const auto add = [&](std::int64_t allocatable, std::int64_t free, std::int64_t requested,
                       double scarcity) {
    if (allocatable <= 0) return;
    const double total = static_cast<double>(allocatable);
    const double before = std::min(1.0, static_cast<double>(allocatable - free) / total);
    const double after = std::min(1.0, static_cast<double>(allocatable - free + requested) / total);
    const double gap_before = std::abs(used_before - before);
    const double gap_after = std::abs(used_after - after);
    sum += scarcity * (1.0 - gap_after) +
           (1.0 - scarcity) * std::clamp(0.5 + 0.5 * (gap_before - gap_after), 0.0, 1.0);
    ++known;
  };
  add(node.cpu_allocatable_milli(), node.cpu_free_milli(), request.cpu_milli, rho.cpu);
  add(node.memory_allocatable_bytes(), node.memory_free_bytes(), request.memory_bytes, rho.memory);
  return known == 0 ? 1.0 : sum / known;
}

}  // namespace linkfit::extender
