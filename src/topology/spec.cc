#include "linkfit/topology/spec.h"

#include "linkfit/common/strings.h"

namespace linkfit::topology {

Result<PcieRelation> ParsePcieRelation(std::string_view text) {
  const std::string lower = ToLower(Trim(text));
  if (lower == "sys" || lower == "soc") return PcieRelation::kSys;
  if (lower == "node") return PcieRelation::kNode;
  if (lower == "phb") return PcieRelation::kPhb;
  if (lower == "pxb") return PcieRelation::kPxb;
  if (lower == "pix") return PcieRelation::kPix;
  return MakeError("unknown PCIe relation " + QuoteForMessage(text) +
                   " (expected SYS, NODE, PHB, PXB or PIX)");
}

std::string_view ToString(PcieRelation relation) {
  switch (relation) {
    case PcieRelation::kSys:
      return "SYS";
    case PcieRelation::kNode:
      return "NODE";
    case PcieRelation::kPhb:
      return "PHB";
    case PcieRelation::kPxb:
      return "PXB";
    case PcieRelation::kPix:
      return "PIX";
  }
  return "SYS";
}

Result<NvlinkFabricKind> ParseNvlinkFabricKind(std::string_view text) {
  const std::string lower = ToLower(Trim(text));
  if (lower == "none" || lower.empty()) return NvlinkFabricKind::kNone;
  if (lower == "direct") return NvlinkFabricKind::kDirect;
  if (lower == "bridge") return NvlinkFabricKind::kBridge;
  if (lower == "nvswitch") return NvlinkFabricKind::kNvswitch;
  return MakeError("unknown NVLink fabric kind " + QuoteForMessage(text) +
                   " (expected none, direct, bridge or nvswitch)");
}

std::string_view ToString(NvlinkFabricKind kind) {
  switch (kind) {
    case NvlinkFabricKind::kNone:
      return "none";
    case NvlinkFabricKind::kDirect:
      return "direct";
    case NvlinkFabricKind::kBridge:
      return "bridge";
    case NvlinkFabricKind::kNvswitch:
      return "nvswitch";
  }
  return "none";
}

Result<MigMode> ParseMigMode(std::string_view text) {
  const std::string lower = ToLower(Trim(text));
  if (lower == "enabled") return MigMode::kEnabled;
  if (lower == "disabled") return MigMode::kDisabled;
  return MakeError("unknown MIG mode " + QuoteForMessage(text) + " (expected enabled or disabled)");
}

std::string_view ToString(MigMode mode) {
  switch (mode) {
    case MigMode::kEnabled:
      return "enabled";
    case MigMode::kDisabled:
      return "disabled";
    case MigMode::kUnknown:
      return "unknown";
  }
  return "unknown";
}

Result<FigureSource> ParseFigureSource(std::string_view text) {
  for (const FigureSource source :
       {FigureSource::kNvml, FigureSource::kNvidiaSmi, FigureSource::kSysfs, FigureSource::kTable,
        FigureSource::kAssumed}) {
    if (text == ToString(source)) return source;
  }
  return MakeError(QuoteForMessage(text) + " is not a figure source (nvml, nvidia-smi, sysfs, " +
                   "table, assumed)");
}

std::string_view ToString(FigureSource source) {
  switch (source) {
    case FigureSource::kNvml:
      return "nvml";
    case FigureSource::kNvidiaSmi:
      return "nvidia-smi";
    case FigureSource::kSysfs:
      return "sysfs";
    case FigureSource::kTable:
      return "table";
    case FigureSource::kAssumed:
      return "assumed";
    case FigureSource::kUnstated:
      break;
  }
  return "unstated";
}

Result<NicLinkLayer> ParseNicLinkLayer(std::string_view text) {
  const std::string lower = ToLower(Trim(text));
  if (lower == "infiniband") return NicLinkLayer::kInfiniband;
  if (lower == "ethernet") return NicLinkLayer::kEthernet;
  return MakeError("unknown link layer " + QuoteForMessage(text) +
                   " (expected InfiniBand or Ethernet)");
}

std::string_view ToString(NicLinkLayer layer) {
  switch (layer) {
    case NicLinkLayer::kInfiniband:
      return "InfiniBand";
    case NicLinkLayer::kEthernet:
      return "Ethernet";
    case NicLinkLayer::kUnknown:
      break;
  }
  return "";
}

}  // namespace linkfit::topology
