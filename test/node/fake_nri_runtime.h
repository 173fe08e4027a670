#pragma once

// FakeNriRuntime: the container runtime's end of an NRI connection, for tests (design §5.4):
// accepts a plugin's registration and calls the plugin's methods over the real mux and ttrpc
// framing. Uses GoogleTest assertions.
//
// Thread-safety: one test thread.

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <string>

#include "linkfit/kube/annotations.h"
#include "linkfit/node/nri_frames.h"
#include "linkfit/node/nri_messages.h"

namespace linkfit::testing {

using node::ContainerEvent;
using node::EncodeContainerEvent;
using node::EncodeMuxFrame;
using node::EncodeTtrpcFrame;
using node::EncodeTtrpcRequest;
using node::EncodeTtrpcResponse;
using node::kPluginConn;
using node::kPluginService;
using node::kRuntimeConn;
using node::MuxReader;
using node::TtrpcFrame;
using node::TtrpcReader;
using node::TtrpcRequest;
using node::TtrpcResponse;
using node::TtrpcType;

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
    for (;;) {
      if (auto message = ttrpc_[conn].Next()) return *message;
      while (auto frame = mux_.Next()) {
        EXPECT_TRUE(ttrpc_[frame->conn].Feed(frame->payload));
      }
      if (auto message = ttrpc_[conn].Next()) return *message;
      char buffer[4096];
      const ssize_t got = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (got <= 0) {
        ADD_FAILURE() << "the plugin closed the connection";
        return {};
      }
      EXPECT_TRUE(mux_.Feed(std::string_view(buffer, static_cast<std::size_t>(got))));
    }
  }
  void Write(std::uint32_t conn, const TtrpcFrame& frame) {
    const std::string bytes = EncodeMuxFrame(conn, EncodeTtrpcFrame(frame).value());
    ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  // Reads the plugin's RegisterPlugin and answers it (status 0 accepts).
  TtrpcRequest AcceptRegistration(std::int32_t status = 0) {
    const TtrpcFrame frame = Read(kRuntimeConn);
    auto request = node::DecodeTtrpcRequest(frame.payload);
    EXPECT_TRUE(request);
    Write(kRuntimeConn, {frame.stream, TtrpcType::kResponse, 0,
                         EncodeTtrpcResponse({status, status == 0 ? "" : "no more plugins", ""})});
    return request.value_or(TtrpcRequest{});
  }
  TtrpcResponse Call(const std::string& method, const std::string& payload) {
    const std::uint32_t stream = next_stream_;
    next_stream_ += 2;
    Write(kPluginConn, {stream, TtrpcType::kRequest, 0,
                        EncodeTtrpcRequest({kPluginService, method, payload, 2'000'000'000, {}})});
    const TtrpcFrame reply = Read(kPluginConn);
    EXPECT_EQ(reply.stream, stream);
    return node::DecodeTtrpcResponse(reply.payload).value_or(TtrpcResponse{});
  }
  TtrpcResponse Create(const std::string& uid, const std::string& plan) {
    ContainerEvent event;
    event.pod = {
        "sandbox-" + uid, "p-" + uid, uid, "ml", {}, {{kube::kAnnotationAllocation, plan}}};
    event.container = {"ctr-" + uid, "sandbox-" + uid, "main", {}, {}};
    return Call("CreateContainer", EncodeContainerEvent(event));
  }

 private:
  int fd_;
  MuxReader mux_;
  std::map<std::uint32_t, TtrpcReader> ttrpc_;
  std::uint32_t next_stream_ = 1;
};

}  // namespace linkfit::testing
