// `linkfit demo` end to end: the real Service on 127.0.0.1:0 with config/demo.yaml, driven over
// HTTP. Checks the facts the story must tell, not its wording.

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "linkfit/app/cli.h"

namespace linkfit::app {
namespace {

// The paragraph that starts with `heading` (up to the next blank line).
std::string Paragraph(const std::string& text, const std::string& heading) {
  const auto begin = text.find(heading);
  if (begin == std::string::npos) return "";
  const auto end = text.find("\n\n", begin);
  return text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

// The field of a paragraph that starts with `label`, e.g. "placed:", with its wrapped lines.
std::string Field(const std::string& paragraph, const std::string& label) {
  const auto begin = paragraph.find("    " + label);
  if (begin == std::string::npos) return "";
  auto end = paragraph.find('\n', begin);
  // Wrapped lines are indented further than the labels.
  while (end != std::string::npos && paragraph.compare(end, 6, "\n     ") == 0) {
    end = paragraph.find('\n', end + 1);
  }
  return paragraph.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

// Runs the demo once for all the checks below.
class DemoTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::ostringstream out;
    std::ostringstream err;
    exit_code_ = RunCli({"demo", "--config", std::string(LINKFIT_SOURCE_DIR) + "/config/demo.yaml"},
                        out, err);
    out_ = out.str();
    err_ = err.str();
  }

  static inline int exit_code_ = -1;
  static inline std::string out_;
  static inline std::string err_;
};

TEST_F(DemoTest, RunsToTheEnd) {
  EXPECT_EQ(exit_code_, 0) << err_;
  EXPECT_NE(out_.find("\nCluster now: 44 GPUs on 6 nodes; "), std::string::npos) << out_;
  EXPECT_NE(out_.find("5 of 5 demo pods placed; server stopped."), std::string::npos) << out_;
  EXPECT_EQ(out_.find("{\""), std::string::npos) << "no raw JSON in the story:\n" << out_;
}

TEST_F(DemoTest, LinesAreShort) {
  std::istringstream lines(out_);
  for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), 100u) << line;
}

TEST_F(DemoTest, NvlinkPodLandsOnAnNvlinkNode) {
  const std::string paragraph = Paragraph(out_, "1) demo/train-4gpu");
  ASSERT_FALSE(paragraph.empty()) << out_;
  EXPECT_NE(paragraph.find("4 GPUs, nvlink required"), std::string::npos) << paragraph;
  // The PCIe-only L40S box and the workstation with NVLink pairs cannot join 4 GPUs by NVLink.
  EXPECT_NE(paragraph.find("4 of 6 nodes pass"), std::string::npos) << paragraph;
  EXPECT_NE(paragraph.find("l40s-0, ws-a6000-0: node has no 4 GPUs joined by NVLink"),
            std::string::npos)
      << paragraph;
  const std::string placed = Field(paragraph, "placed:");
  bool on_nvlink_node = false;
  for (const std::string node : {"dgx1-v100-0", "dgx-a100-0", "dgx-a100-mig-0", "dgx-h100-0"}) {
    on_nvlink_node = on_nvlink_node || placed.find("placed: " + node + ",") != std::string::npos;
  }
  EXPECT_TRUE(on_nvlink_node) << placed;
  EXPECT_NE(placed.find("ring "), std::string::npos) << placed;
  EXPECT_NE(Field(paragraph, "why:").find("GB/s"), std::string::npos) << paragraph;
}

TEST_F(DemoTest, EveryPodKindIsPlaced) {
  EXPECT_NE(Field(Paragraph(out_, "2) demo/finetune-2gpu"), "placed:").find("GPUs "),
            std::string::npos)
      << out_;
  const std::string mig = Field(Paragraph(out_, "3) demo/embedder-mig"), "placed:");
  EXPECT_NE(mig.find("dgx-a100-mig-0, MIG 3g.20gb on GPU"), std::string::npos) << out_;
  const std::string share = Field(Paragraph(out_, "4) demo/notebook-share"), "placed:");
  EXPECT_NE(share.find("250/1000 of GPU"), std::string::npos) << out_;
}

// The 2-GPU job and the notebook go to the partly used A100 (GPUs 0-3 in MIG mode, never an
// 8-GPU host), not to the idle one, and the story says why; the 8-GPU job then finds its machine.
TEST_F(DemoTest, SmallPodsKeepTheWholeMachineTheBigJobNeeds) {
  const std::string finetune = Paragraph(out_, "2) demo/finetune-2gpu");
  EXPECT_NE(Field(finetune, "placed:").find("placed: dgx-a100-mig-0, GPUs "), std::string::npos)
      << finetune;
  const std::string why = Field(finetune, "why:");
  EXPECT_NE(why.find("Whole machines kept"), std::string::npos) << finetune;
  EXPECT_NE(why.find("dgx-a100-0"), std::string::npos) << finetune;
  EXPECT_NE(why.find("idle whole machine"), std::string::npos) << finetune;
  EXPECT_NE(why.find("policy.whole_machines"), std::string::npos) << finetune;
  const std::string share = Field(Paragraph(out_, "4) demo/notebook-share"), "placed:");
  EXPECT_EQ(share.find("dgx-a100-0,"), std::string::npos) << share;
  const std::string big = Paragraph(out_, "5) demo/train-8gpu");
  EXPECT_NE(Field(big, "placed:").find("placed: dgx-a100-0, GPUs 0,1,2,3,4,5,6,7"),
            std::string::npos)
      << big;
}

TEST(DemoFlagsTest, MissingConfigIsAClearError) {
  std::ostringstream out;
  std::ostringstream err;
  EXPECT_EQ(RunCli({"demo", "--config", "/nonexistent/demo.yaml"}, out, err), 2);
  EXPECT_NE(err.str().find("/nonexistent/demo.yaml not found"), std::string::npos) << err.str();
  EXPECT_EQ(RunCli({"demo", "--bogus"}, out, err), 2);
}

}  // namespace
}  // namespace linkfit::app
