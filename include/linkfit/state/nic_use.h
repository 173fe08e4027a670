#pragma once

// NicUse: the occupancy of one node's RDMA NICs as a NodeState keeps it. A NodeState holds it
// behind one owning pointer (NicUseBox), null on a NIC-less node, so that the many nodes without
// NICs pay 8 bytes for them; a node with NICs pays one small heap block, copied with the state
// (NodeState is a value: Apply and Remove copy it).
//
// Thread-safety: plain values; a NicUseBox is as thread-safe as the NodeState that holds it
// (immutable once shared).

#include <cstdint>
#include <memory>
#include <vector>

#include "linkfit/alloc/nic_choice.h"

namespace linkfit::state {

struct NicUse {
  struct PerNic {
    std::uint16_t used_milli = 0;  // thousandths held, 0..1000 (1000: full, or held whole)
    std::uint16_t pods = 0;        // up to 1000 pods may share one NIC, so a byte is not enough
    friend bool operator==(const PerNic&, const PerNic&) = default;
  };
  // NICs linkfit may place on (NodeState::nic_usable()).
  alloc::NicMask usable;
  std::vector<PerNic> per_nic;  // by NIC index (topology().nics() order)
  friend bool operator==(const NicUse&, const NicUse&) = default;
};

// An owned NicUse with value semantics: copying the box copies the NicUse. Null: no NICs.
class NicUseBox {
 public:
  NicUseBox() = default;
  explicit NicUseBox(NicUse use) : use_(std::make_unique<NicUse>(std::move(use))) {}
  NicUseBox(const NicUseBox& other)
      : use_(other.use_ ? std::make_unique<NicUse>(*other.use_) : nullptr) {}
  NicUseBox& operator=(const NicUseBox& other) {
    if (this != &other) use_ = other.use_ ? std::make_unique<NicUse>(*other.use_) : nullptr;
    return *this;
  }
  NicUseBox(NicUseBox&&) noexcept = default;
  NicUseBox& operator=(NicUseBox&&) noexcept = default;
  ~NicUseBox() = default;

  explicit operator bool() const { return use_ != nullptr; }
  // REQUIRES: not null.
  const NicUse& operator*() const { return *use_; }
  NicUse& operator*() { return *use_; }
  const NicUse* operator->() const { return use_.get(); }
  NicUse* operator->() { return use_.get(); }

 private:
  std::unique_ptr<NicUse> use_;
};

}  // namespace linkfit::state
