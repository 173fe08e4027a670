// What PodStore compares of a pod's claims (cluster/device_compare.h), NICs included: a node's
// report names NICs only, so the record fills in their thousandths and GPUs before comparing.

#include "cluster/device_compare.h"

#include <gtest/gtest.h>

namespace linkfit::cluster::internal {
namespace {

using Slot = state::Assignment::NicSlot;

state::Assignment Pod(state::GpuMask gpus, std::vector<Slot> nics) {
  state::Assignment a;
  a.pod_uid = "u";
  a.node = "n";
  a.gpus = gpus;
  a.nics = std::move(nics);
  return a;
}

TEST(DeviceCompareTest, NicsAreDevices) {
  EXPECT_TRUE(SameDevices(Pod(1, {{0, 1000, 0}}), Pod(1, {{0, 1000, 0}})));
  EXPECT_FALSE(SameDevices(Pod(1, {{0, 1000, 0}}), Pod(1, {{1, 1000, 0}})));
  EXPECT_FALSE(SameDevices(Pod(1, {{0, 1000, 0}}), Pod(1, {})));
  EXPECT_FALSE(SameDevices(Pod(1, {{0, 500, 0}}), Pod(1, {{0, 1000, 0}})));
  // Part of a record: NICs started so far, no more of each than the record's.
  EXPECT_TRUE(PartOf(Pod(1, {{0, 500, -1}}), Pod(1, {{0, 500, 0}, {1, 500, 0}})));
  EXPECT_FALSE(PartOf(Pod(1, {{2, 500, -1}}), Pod(1, {{0, 500, 0}})));
  EXPECT_FALSE(PartOf(Pod(1, {{0, 1000, -1}}), Pod(1, {{0, 500, 0}})));
}

TEST(DeviceCompareTest, TheRecordSaysWhatAReportCannot) {
  const state::Assignment recorded = Pod(0b11, {{0, 250, 1}, {1, 1000, 0}});
  state::Assignment reported = Pod(0b11, {{0, 1000, -1}, {1, 1000, -1}, {2, 1000, -1}});
  FillReportedNics(reported, recorded);
  EXPECT_EQ(reported.nics, (std::vector<Slot>{{0, 250, 1}, {1, 1000, 0}, {2, 1000, -1}}));
  // The same NICs reported: no mismatch.
  state::Assignment same = Pod(0b11, {{0, 1000, -1}, {1, 1000, -1}});
  FillReportedNics(same, recorded);
  EXPECT_TRUE(SameDevices(same, recorded));
  // A GPU the report does not show the pod holding is not claimed for its NIC.
  state::Assignment fewer = Pod(0b01, {{0, 1000, -1}});
  FillReportedNics(fewer, recorded);
  EXPECT_EQ(fewer.nics, (std::vector<Slot>{{0, 250, -1}}));
}

}  // namespace
}  // namespace linkfit::cluster::internal
