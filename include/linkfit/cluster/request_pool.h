#pragma once

// RequestPool: one copy of each distinct device request the pod store keeps. The pods of a job,
// a deployment or a notebook fleet ask alike (thousands of pods, a handful of requests), so each
// pod holds an 8-byte handle instead of its own ~170-byte GpuRequest. A copy is counted by its
// handles and freed with the last one, so pools of long-running clusters hold only the requests
// of pods that exist.
//
// Requests are pooled without their CPU and memory (PodStore::Request keeps those inline: they
// vary from pod to pod) and must leave NicRequest::rails empty (the extender fills it per call).
//
// Thread-safety: none; the owner serializes every Acquire and every handle's destruction
// (PodStore does both under its mutex). Reading through a handle needs no lock: a pooled request
// never changes. Handles must not outlive their pool.

#include <cstddef>
#include <memory>
#include <unordered_map>

#include "linkfit/extender/gpu_request.h"

namespace linkfit::cluster {

class RequestPool {
  struct Slot;

 public:
  // A counted reference to one pooled request (move-only; empty when default-constructed).
  class Handle {
   public:
    Handle() = default;
    Handle(Handle&& other) noexcept : slot_(other.slot_) { other.slot_ = nullptr; }
    Handle& operator=(Handle&& other) noexcept;
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    ~Handle() { Reset(); }

    explicit operator bool() const { return slot_ != nullptr; }
    // REQUIRES: non-empty.
    const extender::GpuRequest& operator*() const;
    const extender::GpuRequest* operator->() const { return &**this; }
    void Reset();

   private:
    friend class RequestPool;
    explicit Handle(Slot* slot) : slot_(slot) {}
    Slot* slot_ = nullptr;
  };

  RequestPool() = default;
  RequestPool(const RequestPool&) = delete;
  RequestPool& operator=(const RequestPool&) = delete;
  ~RequestPool();

  // The pooled copy of `request` (equal as GpuRequest::operator== says, once its CPU and memory
  // are cleared), added on first use.
  Handle Acquire(const extender::GpuRequest& request);
  // Distinct requests held.
  std::size_t size() const { return slots_.size(); }

 private:
  struct Slot {
    extender::GpuRequest request;
    std::size_t hash = 0;
    std::size_t users = 0;
    RequestPool* pool = nullptr;
  };
  void Release(Slot* slot);

  // Hash of the request -> the requests with that hash (almost always one).
  std::unordered_multimap<std::size_t, std::unique_ptr<Slot>> slots_;
};

}  // namespace linkfit::cluster
