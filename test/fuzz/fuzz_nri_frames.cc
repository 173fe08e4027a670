// libFuzzer target: the NRI transport's readers (mux and ttrpc framing, the ttrpc envelope,
// src/handoff/), which read whatever the container runtime's socket delivers. Frames must come out
// of any byte split, and an envelope that decodes must encode and decode to itself.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "linkfit/handoff/nri_frames.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace linkfit::handoff;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  MuxReader mux(1 << 16);
  // Feed in uneven pieces; a refused header ends the connection, as it would for real.
  for (std::size_t at = 0, piece = 1; at < text.size(); at += piece, piece = piece % 7 + 1) {
    if (!mux.Feed(text.substr(at, piece))) return 0;
  }
  while (auto frame = mux.Next()) {
    TtrpcReader ttrpc;
    if (!ttrpc.Feed(frame->payload)) continue;
    while (auto message = ttrpc.Next()) {
      if (auto request = DecodeTtrpcRequest(message->payload)) {
        auto again = DecodeTtrpcRequest(EncodeTtrpcRequest(*request));
        if (!again || !(*again == *request)) std::abort();
      }
      if (auto response = DecodeTtrpcResponse(message->payload)) {
        auto again = DecodeTtrpcResponse(EncodeTtrpcResponse(*response));
        if (!again || !(*again == *response)) std::abort();
      }
    }
  }
  return 0;
}
