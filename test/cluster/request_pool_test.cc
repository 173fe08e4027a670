// RequestPool: one counted copy of each distinct device request, freed with its last handle.

#include "linkfit/cluster/request_pool.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace linkfit::cluster {
namespace {

extender::GpuRequest FourGpus() {
  extender::GpuRequest request;
  request.kind = extender::GpuRequest::Kind::kWhole;
  request.count = 4;
  request.closeness = alloc::Closeness::kNvlink;
  return request;
}

TEST(RequestPool, RequestsAlikeShareOneCopyWhateverTheirCpuAndMemory) {
  RequestPool pool;
  extender::GpuRequest small = FourGpus();
  small.cpu_milli = 500;
  extender::GpuRequest big = FourGpus();
  big.cpu_milli = 64000;
  big.memory_bytes = 1LL << 40;
  RequestPool::Handle a = pool.Acquire(small);
  RequestPool::Handle b = pool.Acquire(big);
  EXPECT_EQ(pool.size(), 1u);
  EXPECT_EQ(&*a, &*b);
  EXPECT_EQ(a->count, 4);
  EXPECT_EQ(a->cpu_milli, 0);  // kept by the pod, not the pool
  EXPECT_EQ(b->memory_bytes, 0);
}

TEST(RequestPool, EveryFieldTellsRequestsApart) {
  RequestPool pool;
  std::vector<extender::GpuRequest> requests(7, FourGpus());
  requests[1].count = 2;
  requests[2].closeness = alloc::Closeness::kNode;
  requests[3].gpu_models = {"h100"};
  requests[4].nics.count = alloc::NicRequest::kPerGpu;
  requests[5].nics = requests[4].nics;
  requests[5].nics.milli = 250;
  requests[6].group = "ml/job-7";
  std::vector<RequestPool::Handle> handles;
  for (const extender::GpuRequest& request : requests) handles.push_back(pool.Acquire(request));
  EXPECT_EQ(pool.size(), requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(*handles[i], requests[i]) << i;
}

TEST(RequestPool, ACopyIsFreedWithItsLastHandle) {
  RequestPool pool;
  RequestPool::Handle a = pool.Acquire(FourGpus());
  RequestPool::Handle b = pool.Acquire(FourGpus());
  a.Reset();
  EXPECT_FALSE(a);
  EXPECT_EQ(pool.size(), 1u);
  EXPECT_EQ(b->count, 4);
  RequestPool::Handle moved = std::move(b);
  EXPECT_FALSE(b);  // NOLINT(bugprone-use-after-move): a moved-from handle is empty
  EXPECT_EQ(pool.size(), 1u);
  // Assigning over a handle releases what it held.
  extender::GpuRequest other = FourGpus();
  other.count = 8;
  moved = pool.Acquire(other);
  EXPECT_EQ(pool.size(), 1u);
  EXPECT_EQ(moved->count, 8);
  moved = RequestPool::Handle();
  EXPECT_EQ(pool.size(), 0u);
}

}  // namespace
}  // namespace linkfit::cluster
