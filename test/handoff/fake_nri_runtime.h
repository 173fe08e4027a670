#pragma once

// FakeNriRuntime: the container runtime's end of an NRI connection, for tests (design §5.4):
// accepts a plugin's registration and calls the plugin's methods over the real mux and ttrpc
// framing. It writes as a Go runtime writes (EncodeMuxMessage) and reads as one reads
// (GoTtrpcReader): a reply a real runtime could not read fails the test. Uses GoogleTest
// assertions.
//
// Thread-safety: one test thread.

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <deque>
#include <map>
#include <memory>
#include <string>

#include "handoff/go_ttrpc_reader.h"
#include "linkfit/handoff/nri_frames.h"
#include "linkfit/handoff/nri_messages.h"
#include "linkfit/kube/annotations.h"

namespace linkfit::testing {

using handoff::ContainerEvent;
using handoff::EncodeContainerEvent;
using handoff::EncodeMuxMessage;
using handoff::EncodeTtrpcFrame;
using handoff::EncodeTtrpcRequest;
using handoff::EncodeTtrpcResponse;
using handoff::kPluginConn;
using handoff::kPluginService;
using handoff::kRuntimeConn;
using handoff::MuxReader;
using handoff::TtrpcFrame;
using handoff::TtrpcRequest;
using handoff::TtrpcResponse;
using handoff::TtrpcType;

// The runtime's end of the socket.
class FakeNriRuntime {
 public:
  explicit FakeNriRuntime(int fd) : fd_(fd) {}
  ~FakeNriRuntime() { Close(); }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // Reads until a whole ttrpc message arrives on `conn`.
  TtrpcFrame Read(std::uint32_t conn) {
    auto& reader = readers_[conn];
    if (!reader) {
      reader = std::make_unique<GoTtrpcReader>([this, conn] { return NextFrame(conn); });
    }
    auto message = reader->Recv();
    if (!message) {
      ADD_FAILURE() << "a Go runtime could not read the plugin's message: "
                    << message.error().message;
      return {};
    }
    return *message;
  }
  // Writes a ttrpc message as a Go runtime writes it.
  void Write(std::uint32_t conn, const TtrpcFrame& frame) {
    WriteBytes(EncodeMuxMessage(conn, EncodeTtrpcFrame(frame).value()));
  }
  void WriteBytes(const std::string& bytes) {
    ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  // The sizes of the mux frames the plugin sent on `conn` so far.
  const std::vector<std::size_t>& frame_sizes(std::uint32_t conn) { return frame_sizes_[conn]; }
  // Reads the plugin's RegisterPlugin and answers it (status 0 accepts).
  TtrpcRequest AcceptRegistration(std::int32_t status = 0) {
    const TtrpcFrame frame = Read(kRuntimeConn);
    auto request = handoff::DecodeTtrpcRequest(frame.payload);
    EXPECT_TRUE(request);
    Write(kRuntimeConn, {frame.stream, TtrpcType::kResponse, 0,
                         EncodeTtrpcResponse({status, status == 0 ? "" : "no more plugins", ""})});
    return request.value_or(TtrpcRequest{});
  }
  // The plugin's start-up as containerd 2.1 runs it: accepts the registration, then Configure;
  // the status Configure answered (0: configured).
  std::int32_t AcceptAndConfigure() {
    AcceptRegistration();
    return Call("Configure", handoff::EncodeConfigureRequest({"", "containerd", "v2.1.1"}))
        .status_code;
  }
  TtrpcResponse Call(const std::string& method, const std::string& payload) {
    const std::uint32_t stream = next_stream_;
    next_stream_ += 2;
    Write(kPluginConn, {stream, TtrpcType::kRequest, 0,
                        EncodeTtrpcRequest({kPluginService, method, payload, 2'000'000'000, {}})});
    const TtrpcFrame reply = Read(kPluginConn);
    EXPECT_EQ(reply.stream, stream);
    return handoff::DecodeTtrpcResponse(reply.payload).value_or(TtrpcResponse{});
  }
  TtrpcResponse Create(const std::string& uid, const std::string& plan) {
    ContainerEvent event;
    event.pod = {
        "sandbox-" + uid, "p-" + uid, uid, "ml", {}, {{kube::kAnnotationAllocation, plan}}};
    event.container = {"ctr-" + uid, "sandbox-" + uid, "main", {}, {}};
    return Call("CreateContainer", EncodeContainerEvent(event));
  }

 private:
  // The next mux frame of `conn`, reading the socket until one comes; nullopt when it closes.
  std::optional<std::string> NextFrame(std::uint32_t conn) {
    for (;;) {
      if (!frames_[conn].empty()) {
        std::string frame = std::move(frames_[conn].front());
        frames_[conn].pop_front();
        return frame;
      }
      char buffer[4096];
      const ssize_t got = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (got <= 0) return std::nullopt;
      EXPECT_TRUE(mux_.Feed(std::string_view(buffer, static_cast<std::size_t>(got))));
      while (auto frame = mux_.Next()) {
        frame_sizes_[frame->conn].push_back(frame->payload.size());
        frames_[frame->conn].push_back(std::move(frame->payload));
      }
    }
  }

  int fd_;
  MuxReader mux_;
  std::map<std::uint32_t, std::deque<std::string>> frames_;
  std::map<std::uint32_t, std::vector<std::size_t>> frame_sizes_;
  std::map<std::uint32_t, std::unique_ptr<GoTtrpcReader>> readers_;
  std::uint32_t next_stream_ = 1;
};

}  // namespace linkfit::testing
