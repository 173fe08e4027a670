#pragma once

// Output of a run: CSV series, gnuplot SVG plots, OUT/summary.json and OUT/report.md.
// Plots are best effort: without gnuplot the CSV and a note remain.
//
// Thread-safety: functions write files; do not call them on one path concurrently.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "linkfit/common/result.h"

namespace linkfit::bench {

struct Series {
  std::string name;
  std::vector<double> x;
  std::vector<double> y;
};

// The empirical CDF of `values`: one point per distinct value (x ascending, y = share <= x).
Series Cdf(const std::string& name, std::vector<double> values);
// The mean (0 for none) and the p-quantile by nearest rank (0 for none).
double Mean(const std::vector<double>& values);
double Percentile(std::vector<double> values, double p);

// Writes `text` to `path` (replacing it).
Result<void> WriteText(const std::string& path, const std::string& text);

// Writes one CSV: the x column (from the first series) then one column per series. Series of
// different x grids are written as separate (x, y) column pairs.
Result<void> WriteSeriesCsv(const std::string& path, const std::string& x_label,
                            const std::vector<Series>& series);

struct Plot {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::string csv_path;  // as written by WriteSeriesCsv
  std::string svg_path;
  std::size_t series_count = 0;
  std::string extra_commands;   // gnuplot lines (ranges, key position)
  bool paired_columns = false;  // the CSV holds (x, y) pairs per series
};

// Renders `plot` with gnuplot's SVG terminal; returns false (and says why on stderr) if it cannot.
bool PlotLines(const Plot& plot);

// Writes summary.json (pretty-printed) and report.md for `summary` into `out_dir`.
Result<void> WriteSummary(const std::string& out_dir, const nlohmann::json& summary);
Result<void> WriteReport(const std::string& out_dir, const nlohmann::json& summary,
                         const std::string& command_line);

}  // namespace linkfit::bench
