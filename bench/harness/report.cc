#include "harness/report.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

namespace linkfit::bench {

Series Cdf(const std::string& name, std::vector<double> values) {
  std::sort(values.begin(), values.end());
  Series series{name, {}, {}};
  const double n = static_cast<double>(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i + 1 < values.size() && values[i + 1] == values[i]) continue;  // one point per step
    series.x.push_back(values[i]);
    series.y.push_back(static_cast<double>(i + 1) / n);
  }
  return series;
}

double Mean(const std::vector<double>& values) {
  double sum = 0;
  for (double value : values) sum += value;
  return values.empty() ? 0 : sum / static_cast<double>(values.size());
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto index = static_cast<std::size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

Result<void> WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return MakeError(path + ": cannot write");
  out << text;
  if (!out) return MakeError(path + ": write failed");
  return {};
}

namespace {

std::string ShellQuote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

std::string Fixed(double value, int digits) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << value;
  return out.str();
}

std::string Cell(const nlohmann::json& value) {
  if (value.is_number_integer()) return std::to_string(value.get<long long>());
  if (value.is_number()) return Fixed(value.get<double>(), 3);
  if (value.is_string()) return value.get<std::string>();
  if (value.is_null()) return "";
  return value.dump();
}

}  // namespace

Result<void> WriteSeriesCsv(const std::string& path, const std::string& x_label,
                            const std::vector<Series>& series) {
  std::ostringstream out;
  bool shared_x = true;
  for (const Series& s : series) shared_x = shared_x && s.x == series.front().x;
  if (series.empty()) return WriteText(path, x_label + "\n");
  if (shared_x) {
    out << x_label;
    for (const Series& s : series) out << ',' << s.name;
    out << '\n';
    for (std::size_t row = 0; row < series.front().x.size(); ++row) {
      out << series.front().x[row];
      for (const Series& s : series) out << ',' << s.y[row];
      out << '\n';
    }
    return WriteText(path, out.str());
  }
  std::size_t rows = 0;
  for (const Series& s : series) {
    out << (&s == &series.front() ? "" : ",") << s.name << "_" << x_label << ',' << s.name;
    rows = std::max(rows, s.x.size());
  }
  out << '\n';
  for (std::size_t row = 0; row < rows; ++row) {
    for (const Series& s : series) {
      out << (&s == &series.front() ? "" : ",");
      if (row < s.x.size()) {
        out << s.x[row] << ',' << s.y[row];
      } else {
        out << ',';
      }
    }
    out << '\n';
  }
  return WriteText(path, out.str());
}

bool PlotLines(const Plot& plot) {
  std::ostringstream script;
  script << "set terminal svg size 900,560 dynamic enhanced font 'sans,12'\n"
         << "set output \"" << plot.svg_path << "\"\n"
         << "set datafile separator ','\n"
         << "set title \"" << plot.title << "\" noenhanced\n"
         << "set xlabel \"" << plot.x_label << "\" noenhanced\n"
         << "set ylabel \"" << plot.y_label << "\" noenhanced\n"
         << "set grid\nset key noenhanced\n"
         << plot.extra_commands;
  script << "plot ";
  for (std::size_t i = 0; i < plot.series_count; ++i) {
    if (i > 0) script << ", ";
    script << "\"" << plot.csv_path << "\" using ";
    if (plot.paired_columns) {
      script << (2 * i + 1) << ":" << (2 * i + 2);
    } else {
      script << "1:" << (i + 2);
    }
    script << " with lines lw 2 title columnhead(" << (plot.paired_columns ? 2 * i + 2 : i + 2)
           << ")";
  }
  script << "\n";
  const std::string script_path = plot.svg_path + ".gp";
  if (!WriteText(script_path, script.str())) return false;
  const std::string command = "gnuplot " + ShellQuote(script_path) + " 2>/dev/null";
  const int status = std::system(command.c_str());
  std::error_code ignored;
  std::filesystem::remove(script_path, ignored);  // the SVG and CSV are the outputs
  if (status != 0) {
    std::fprintf(stderr, "note: gnuplot could not render %s (the CSV is there)\n",
                 plot.svg_path.c_str());
    return false;
  }
  return true;
}

Result<void> WriteSummary(const std::string& out_dir, const nlohmann::json& summary) {
  return WriteText(out_dir + "/summary.json", summary.dump(2) + "\n");
}

Result<void> WriteReport(const std::string& out_dir, const nlohmann::json& summary,
                         const std::string& command_line) {
  std::ostringstream out;
  const auto found = summary.find("experiment");
  const std::string experiment =
      found != summary.end() && found->is_string() ? found->get<std::string>() : "?";
  out << "# linkfit-bench: " << experiment << "\n\n"
      << "Command: `" << command_line << "`\n\n";
  if (summary.contains("notes")) {
    for (const auto& note : summary["notes"]) out << "- " << note.get<std::string>() << "\n";
    out << "\n";
  }
  const nlohmann::json& results = summary["results"];
  if (results.is_array() && !results.empty()) {
    std::vector<std::string> columns;
    for (const auto& [key, value] : results.front().items()) {
      if (!value.is_structured()) columns.push_back(key);
    }
    out << "|";
    for (const std::string& column : columns) out << " " << column << " |";
    out << "\n|";
    for (std::size_t i = 0; i < columns.size(); ++i) out << (i == 0 ? " --- |" : " ---: |");
    out << "\n";
    for (const auto& result : results) {
      out << "|";
      for (const std::string& column : columns) {
        out << " " << (result.contains(column) ? Cell(result[column]) : "") << " |";
      }
      out << "\n";
    }
  }
  if (summary.contains("plots")) {
    out << "\nPlots:\n";
    for (const auto& plot : summary["plots"]) {
      const std::string file = plot.get<std::string>();
      out << "\n![" << file << "](" << file << ")\n";
    }
  }
  if (summary.contains("reading")) {
    out << "\n## How to read this\n\n";
    for (const auto& line : summary["reading"]) out << line.get<std::string>() << "\n\n";
  }
  return WriteText(out_dir + "/report.md", out.str());
}

}  // namespace linkfit::bench
