// GpuModelTable (gpu_models.h): the parser of config/gpus.json and the lookup by model name.

#include "linkfit/topology/gpu_models.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>

#include <nlohmann/json.hpp>

#include "linkfit/common/strings.h"
#include "topology/gpu_models_builtin.h"

namespace linkfit::topology {
namespace {

using nlohmann::json;

constexpr std::string_view kSchema = "linkfit-gpu-models/v1";
constexpr std::size_t kMaxFileBytes = 1 << 20;

// Splits a model name into upper-case words ("Tesla V100-SXM2-32GB" -> TESLA V100 SXM2 32GB).
std::vector<std::string> ModelWords(std::string_view model) {
  std::vector<std::string> words;
  std::string current;
  for (const char c : model) {
    if (c == ' ' || c == '-' || c == '_' || c == '\t') {
      if (!current.empty()) words.push_back(ToUpper(current));
      current.clear();
    } else {
      current += c;
    }
  }
  if (!current.empty()) words.push_back(ToUpper(current));
  return words;
}

// Whether `word` (upper case) matches `pattern` (upper case): '#' is one digit, '*' any run of
// digits (none included), anything else itself.
bool WordMatches(std::string_view pattern, std::string_view word) {
  if (pattern.empty()) return word.empty();
  if (pattern[0] == '*') {
    for (std::size_t n = 0;; ++n) {
      if (WordMatches(pattern.substr(1), word.substr(n))) return true;
      if (n >= word.size() || !IsDigit(word[n])) return false;
    }
  }
  if (word.empty()) return false;
  const bool same = pattern[0] == '#' ? IsDigit(word[0]) : pattern[0] == word[0];
  return same && WordMatches(pattern.substr(1), word.substr(1));
}

bool Matches(const GpuModelTable::Entry& entry, const std::vector<std::string>& words,
             std::uint64_t memory_mib) {
  if (memory_mib < entry.memory_mib_min || memory_mib > entry.memory_mib_max) return false;
  return std::any_of(entry.match.begin(), entry.match.end(), [&](const auto& alternative) {
    return std::all_of(alternative.begin(), alternative.end(), [&](const std::string& pattern) {
      return std::any_of(words.begin(), words.end(),
                         [&](const std::string& word) { return WordMatches(pattern, word); });
    });
  });
}

// Reads one entry; `where` is "gpus.json: models[3]".
class EntryReader {
 public:
  EntryReader(const json& item, std::string where) : item_(item), where_(std::move(where)) {}

  Result<GpuModelTable::Entry> Read() {
    if (!item_.is_object()) return Fail("", "expected an object");
    static const std::set<std::string> kKeys = {"name",
                                                "match",
                                                "memory_mib_min",
                                                "memory_mib_max",
                                                "nvlink_generation",
                                                "nvlink_link_GBps",
                                                "pcie_generation",
                                                "mig_profile_set",
                                                "p2p",
                                                "source"};
    GpuModelTable::Entry entry;
    if (const auto name = item_.find("name"); name != item_.end() && name->is_string()) {
      entry.name = name->get<std::string>();
      if (!entry.name.empty()) where_ += " (" + entry.name + ")";
    }
    for (const auto& [key, value] : item_.items()) {
      if (kKeys.count(key) == 0) return Fail(key, "unknown field");
    }
    LINKFIT_ASSIGN_OR_RETURN(entry.name, String("name", /*required=*/true));
    LINKFIT_ASSIGN_OR_RETURN(entry.source, String("source", /*required=*/true));
    LINKFIT_ASSIGN_OR_RETURN(entry.match, Match());
    LINKFIT_ASSIGN_OR_RETURN(entry.memory_mib_min, Memory("memory_mib_min", 0));
    LINKFIT_ASSIGN_OR_RETURN(entry.memory_mib_max, Memory("memory_mib_max", UINT64_MAX));
    if (entry.memory_mib_min > entry.memory_mib_max) {
      return Fail("memory_mib_min", "above memory_mib_max");
    }
    LINKFIT_ASSIGN_OR_RETURN(entry.nvlink_generation, Generation("nvlink_generation", 1, 9));
    LINKFIT_ASSIGN_OR_RETURN(entry.nvlink_link_gbps, LinkRate("nvlink_link_GBps"));
    LINKFIT_ASSIGN_OR_RETURN(entry.pcie_generation, Generation("pcie_generation", 1, 7));
    if (item_.contains("mig_profile_set")) {
      entry.states_mig = true;
      LINKFIT_ASSIGN_OR_RETURN(entry.mig_profile_set, String("mig_profile_set", true));
      const bool valid =
          std::all_of(entry.mig_profile_set.begin(), entry.mig_profile_set.end(), [](char c) {
            return IsDigit(c) || (c >= 'a' && c <= 'z') || c == '-' || c == '.' || c == '_';
          });
      if (!valid) return Fail("mig_profile_set", "expected a MIG profile set id like a100-80gb");
    }
    if (const auto p2p = item_.find("p2p"); p2p != item_.end()) {
      if (!p2p->is_boolean()) return Fail("p2p", "expected true or false");
      entry.states_p2p = true;
      entry.p2p = p2p->get<bool>();
    }
    if (entry.nvlink_generation == 0 && entry.nvlink_link_gbps == 0 && entry.pcie_generation == 0 &&
        !entry.states_mig && !entry.states_p2p) {
      return Fail("",
                  "states no figure (nvlink_generation, nvlink_link_GBps, pcie_generation, "
                  "mig_profile_set, p2p)");
    }
    return entry;
  }

 private:
  tl::unexpected<Error> Fail(const std::string& field, const std::string& what) const {
    return MakeError(where_ + ": " + (field.empty() ? "" : field + ": ") + what);
  }

  Result<std::string> String(const char* key, bool required) const {
    const auto it = item_.find(key);
    if (it == item_.end()) {
      if (required) return Fail(key, "missing");
      return std::string();
    }
    if (!it->is_string() || it->get<std::string>().empty()) {
      return Fail(key, "expected a non-empty string");
    }
    return it->get<std::string>();
  }

  Result<std::uint64_t> Memory(const char* key, std::uint64_t fallback) const {
    const auto it = item_.find(key);
    if (it == item_.end()) return fallback;
    if (!it->is_number_unsigned()) return Fail(key, "expected a whole number of MiB");
    return it->get<std::uint64_t>();
  }

  Result<int> Generation(const char* key, int low, int high) const {
    const auto it = item_.find(key);
    if (it == item_.end()) return 0;
    const std::string range = std::to_string(low) + ".." + std::to_string(high);
    if (!it->is_number_integer()) return Fail(key, "expected an integer " + range);
    const auto value = it->get<std::int64_t>();
    if (value < low || value > high) {
      return Fail(key, std::to_string(value) + " is outside " + range);
    }
    return static_cast<int>(value);
  }

  // GB/s per direction of one link: above 0, at most 1000.
  Result<double> LinkRate(const char* key) const {
    const auto it = item_.find(key);
    if (it == item_.end()) return 0.0;
    if (!it->is_number()) return Fail(key, "expected a number of GB/s above 0, at most 1000");
    const double value = it->get<double>();
    if (!(value > 0 && value <= 1000)) {
      return Fail(key, "expected a number of GB/s above 0, at most 1000");
    }
    return value;
  }

  Result<std::vector<std::vector<std::string>>> Match() const {
    const auto it = item_.find("match");
    if (it == item_.end()) return Fail("match", "missing");
    if (!it->is_array() || it->empty()) return Fail("match", "expected a non-empty array");
    std::vector<std::vector<std::string>> alternatives;
    for (const json& alternative : *it) {
      if (!alternative.is_string()) return Fail("match", "expected strings");
      const std::string text = alternative.get<std::string>();
      const bool valid = std::all_of(text.begin(), text.end(), [](char c) {
        return IsDigit(c) || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == ' ' ||
               c == '#' || c == '*';
      });
      std::vector<std::string> words = ModelWords(text);
      if (!valid || words.empty()) {
        return Fail("match",
                    QuoteForMessage(text) + ": expected words of letters, digits, '#' and '*'");
      }
      alternatives.push_back(std::move(words));
    }
    return alternatives;
  }

  const json& item_;
  std::string where_;
};

}  // namespace

Result<GpuModelTable> GpuModelTable::Parse(std::string_view json_text, std::string_view file_name) {
  const std::string file(file_name);
  const json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return MakeError(file + ": not valid JSON");
  if (!root.is_object()) return MakeError(file + ": expected an object");
  for (const auto& [key, value] : root.items()) {
    if (key != "schema" && key != "models" && key != "comment") {
      return MakeError(file + ": " + key + ": unknown field");
    }
  }
  const auto schema = root.find("schema");
  if (schema == root.end() || !schema->is_string() || schema->get<std::string>() != kSchema) {
    return MakeError(file + ": schema: expected \"" + std::string(kSchema) + "\"");
  }
  const auto models = root.find("models");
  if (models == root.end() || !models->is_array()) {
    return MakeError(file + ": models: expected an array");
  }
  GpuModelTable table;
  for (std::size_t i = 0; i < models->size(); ++i) {
    EntryReader reader((*models)[i], file + ": models[" + std::to_string(i) + "]");
    Entry entry;
    LINKFIT_ASSIGN_OR_RETURN(entry, reader.Read());
    table.entries_.push_back(std::move(entry));
  }
  return table;
}

Result<GpuModelTable> GpuModelTable::LoadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return MakeError(path + ": cannot be read");
  std::string text;
  text.resize(kMaxFileBytes + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > kMaxFileBytes) return MakeError(path + ": larger than 1 MiB");
  return Parse(text, path);
}

const GpuModelTable& GpuModelTable::Builtin() {
  // config/gpus.json is checked by a test; an unreadable copy would leave the table empty (every
  // figure then comes from the machine or is assumed), never a crash.
  static const GpuModelTable table = [] {
    auto parsed = Parse(internal::kBuiltinGpuModels, "config/gpus.json (built in)");
    return parsed ? std::move(*parsed) : GpuModelTable();
  }();
  return table;
}

GpuModelFacts GpuModelTable::Lookup(std::string_view model, std::uint64_t memory_mib) const {
  GpuModelFacts facts;
  const std::vector<std::string> words = ModelWords(model);
  for (const Entry& entry : entries_) {
    if (!Matches(entry, words, memory_mib)) continue;
    if (!facts.nvlink_generation.known() && entry.nvlink_generation > 0) {
      facts.nvlink_generation = {entry.nvlink_generation, entry.source};
    }
    if (!facts.nvlink_link_gbps.known() && entry.nvlink_link_gbps > 0) {
      facts.nvlink_link_gbps = {entry.nvlink_link_gbps, entry.source};
    }
    if (!facts.pcie_generation.known() && entry.pcie_generation > 0) {
      facts.pcie_generation = {entry.pcie_generation, entry.source};
    }
    if (!facts.mig_profile_set.known() && entry.states_mig) {
      facts.mig_profile_set = {entry.mig_profile_set, entry.source};
    }
    if (!facts.p2p.known() && entry.states_p2p) facts.p2p = {entry.p2p, entry.source};
  }
  if (!facts.p2p.known()) facts.p2p.value = true;
  return facts;
}

}  // namespace linkfit::topology
