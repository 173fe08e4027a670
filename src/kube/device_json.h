#pragma once

// JSON pieces shared by the two device codecs of annotations.h (the allocation record and
// linkfit.io/devices-in-use): GPU index lists, string lists and MIG instance entries, written by
// hand and read with the strict simdjson helpers of json_reader.h.
//
// Thread-safety: pure functions; a Ctx belongs to one decode call.

#include <string>
#include <string_view>
#include <vector>

#include "kube/json_reader.h"
#include "linkfit/kube/annotations.h"

namespace linkfit::kube::json {

inline constexpr int kMaxGpuIndex = 15;

inline constexpr int kMaxNicRail = 127;  // topology::kMaxNics - 1

// "[1,2,3]".
void AppendInts(std::string& out, const std::vector<int>& values);
// `["a","b"]`.
void AppendStrings(std::string& out, const std::vector<std::string>& values);
// `,"mig":[{"gpu":G,"profile":"P","start":S[,"uuid":"U"]},...]`; nothing for an empty list.
void AppendMigList(std::string& out, const std::vector<AllocationRecord::Mig>& mig);

// An integer in [min, max] into an int; false (with the error in `c`) otherwise.
bool ReadIntField(Ctx& c, od::value& v, const std::string& where, int min, int max, int* out);
// Records "<where>: unknown key "<key>"" and returns false.
bool UnknownKey(Ctx& c, const std::string& where, std::string_view key);
// A list of GPU indexes (0..15).
bool ReadGpuList(Ctx& c, od::value& v, const std::string& where, std::vector<int>* out);
// A list of strings, appended to *out.
bool ReadStringList(Ctx& c, od::value& v, const std::string& where, std::vector<std::string>* out);
// One MIG entry {gpu, profile, start, uuid}: strict (unknown keys, ranges, a missing profile).
bool ReadMigEntry(Ctx& c, od::value& v, const std::string& where, AllocationRecord::Mig* mig);

}  // namespace linkfit::kube::json
