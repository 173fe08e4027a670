#pragma once

// GoTtrpcReader: how a Go NRI peer (the runtime, through containerd/ttrpc and NRI's
// pkg/net/multiplex) reads ttrpc messages from one mux connection, for tests that must fail
// where a real runtime would drop linkfit's plugin:
//
//   ttrpc channel.recv   io.ReadFull of the 10-byte header, then of the payload, through a
//                        bufio.Reader of 4096 bytes (Go's default size)
//   bufio.Reader.Read    empty buffer and a read of at least 4096 bytes: straight into the
//                        caller's slice; else one read into its own 4096-byte buffer
//   mux conn.Read        hands over exactly one frame per read, and fails (ENOMEM) when the
//                        frame is longer than the slice it reads into
//
// A message buffer from ttrpc's pool may have spare capacity; the model gives it none, the
// strictest case. Frames come from `next_frame`, which blocks or answers nullopt when there are
// no more.
//
// Thread-safety: plain value; one reader per connection, used by one thread.

#include <algorithm>
#include <cstring>
#include <functional>
#include <optional>
#include <string>

#include "linkfit/common/result.h"
#include "linkfit/handoff/nri_frames.h"

namespace linkfit::testing {

class GoTtrpcReader {
 public:
  using NextFrame = std::function<std::optional<std::string>()>;
  explicit GoTtrpcReader(NextFrame next_frame) : next_frame_(std::move(next_frame)) {}

  // The next message, or why a Go reader would have failed on the frames it was given.
  Result<handoff::TtrpcFrame> Recv() {
    char header[handoff::kTtrpcHeaderBytes];
    if (auto read = ReadFull(header, sizeof(header)); !read) return tl::unexpected(read.error());
    const auto u32 = [&](std::size_t at) {
      return static_cast<std::uint32_t>(static_cast<unsigned char>(header[at])) << 24 |
             static_cast<std::uint32_t>(static_cast<unsigned char>(header[at + 1])) << 16 |
             static_cast<std::uint32_t>(static_cast<unsigned char>(header[at + 2])) << 8 |
             static_cast<std::uint32_t>(static_cast<unsigned char>(header[at + 3]));
    };
    handoff::TtrpcFrame frame;
    frame.stream = u32(4);
    frame.type = static_cast<handoff::TtrpcType>(header[8]);
    frame.flags = static_cast<std::uint8_t>(header[9]);
    const std::uint32_t length = u32(0);
    if (length > handoff::kTtrpcMaxPayload) return MakeError("ttrpc: oversized message");
    frame.payload.assign(length, '\0');
    if (auto read = ReadFull(frame.payload.data(), length); !read) {
      return tl::unexpected(read.error());
    }
    return frame;
  }

 private:
  // mux conn.Read into a slice of `capacity` bytes.
  Result<std::size_t> ConnRead(char* into, std::size_t capacity) {
    std::optional<std::string> frame = next_frame_();
    if (!frame) return MakeError("the connection ended inside a message");
    if (frame->size() > capacity) {
      return MakeError("ENOMEM: a mux frame of " + std::to_string(frame->size()) +
                       " bytes read into " + std::to_string(capacity));
    }
    std::memcpy(into, frame->data(), frame->size());
    return frame->size();
  }

  // bufio.Reader.Read.
  Result<std::size_t> BufferedRead(char* into, std::size_t length) {
    if (start_ == end_) {
      if (length >= sizeof(buffer_)) return ConnRead(into, length);
      start_ = end_ = 0;
      std::size_t got = 0;
      LINKFIT_ASSIGN_OR_RETURN(got, ConnRead(buffer_, sizeof(buffer_)));
      end_ = got;
    }
    const std::size_t copied = std::min(length, end_ - start_);
    std::memcpy(into, buffer_ + start_, copied);
    start_ += copied;
    return copied;
  }

  Result<void> ReadFull(char* into, std::size_t length) {
    for (std::size_t done = 0; done < length;) {
      std::size_t got = 0;
      LINKFIT_ASSIGN_OR_RETURN(got, BufferedRead(into + done, length - done));
      done += got;
    }
    return {};
  }

  NextFrame next_frame_;
  char buffer_[handoff::kTtrpcChannelBuffer] = {};
  std::size_t start_ = 0;
  std::size_t end_ = 0;
};

}  // namespace linkfit::testing
