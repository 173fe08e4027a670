#pragma once

// The `nic` experiment's words: the rules each policy follows and the models behind the figures
// (the summary's "reading", report.md's "How to read this"), and issue 37's targets checked
// against a run's results (the summary's "notes", at the top of report.md).
//
// Thread-safety: pure functions.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace linkfit::bench {

// "12.5 GB/s".
std::string FormatGbps(double gbps);

// `machines`: one line per machine kind (its fixture and NIC rate with the rate's source);
// `staged_gbps`: the staged path's rate by PCIe generation (index 3-5 used).
nlohmann::json NicReading(const std::vector<std::string>& machines, const double* staged_gbps);

// One line per target: met, not met (with the figures), or not evaluated (a policy not run).
nlohmann::json NicTargetNotes(const nlohmann::json& results);

}  // namespace linkfit::bench
