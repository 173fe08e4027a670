#include "harness/lp.h"

#include <cmath>
#include <string>

namespace linkfit::bench {
namespace {

constexpr double kEpsilon = 1e-9;
constexpr int kDegenerateRunBeforeBland = 50;

}  // namespace

Result<LpSolution> Maximise(const LinearProgram& program) {
  const int n = program.columns;
  const int m = static_cast<int>(program.rows.size());
  if (n <= 0 || static_cast<int>(program.objective.size()) != n ||
      static_cast<int>(program.bounds.size()) != m) {
    return MakeError("linear program: sizes do not match");
  }
  const int width = n + m + 1;  // x, slacks, right-hand side
  auto at = [width](int row, int column) {
    return static_cast<std::size_t>(row) * static_cast<std::size_t>(width) +
           static_cast<std::size_t>(column);
  };
  // Rows 0..m-1: constraints; row m: the objective row (reduced costs, negated).
  std::vector<double> t(static_cast<std::size_t>(m + 1) * static_cast<std::size_t>(width), 0.0);
  std::vector<int> basis(static_cast<std::size_t>(m));
  for (int r = 0; r < m; ++r) {
    const std::vector<double>& row = program.rows[static_cast<std::size_t>(r)];
    if (static_cast<int>(row.size()) != n) return MakeError("linear program: a row's size");
    const double b = program.bounds[static_cast<std::size_t>(r)];
    if (!(b >= 0)) return MakeError("linear program: a negative bound in row " + std::to_string(r));
    for (int c = 0; c < n; ++c) t[at(r, c)] = row[static_cast<std::size_t>(c)];
    t[at(r, n + r)] = 1.0;
    t[at(r, width - 1)] = b;
    basis[static_cast<std::size_t>(r)] = n + r;
  }
  for (int c = 0; c < n; ++c) t[at(m, c)] = -program.objective[static_cast<std::size_t>(c)];

  LpSolution solution;
  const int limit = 100 * (n + m);
  int degenerate_run = 0;
  for (;;) {
    const bool bland = degenerate_run >= kDegenerateRunBeforeBland;
    int entering = -1;
    double most_negative = -kEpsilon;
    for (int c = 0; c < n + m; ++c) {
      if (t[at(m, c)] < most_negative) {
        entering = c;
        if (bland) break;  // the lowest index with a negative reduced cost
        most_negative = t[at(m, c)];
      }
    }
    if (entering < 0) break;  // optimal
    int leaving = -1;
    double best_ratio = 0;
    for (int r = 0; r < m; ++r) {
      const double a = t[at(r, entering)];
      if (a <= kEpsilon) continue;
      const double ratio = t[at(r, width - 1)] / a;
      if (leaving < 0 || ratio < best_ratio - kEpsilon ||
          (std::fabs(ratio - best_ratio) <= kEpsilon &&
           basis[static_cast<std::size_t>(r)] < basis[static_cast<std::size_t>(leaving)])) {
        leaving = r;
        best_ratio = ratio;
      }
    }
    if (leaving < 0) return MakeError("linear program: unbounded");
    if (++solution.pivots > limit) return MakeError("linear program: pivot limit reached");
    degenerate_run = best_ratio <= kEpsilon ? degenerate_run + 1 : 0;
    const double pivot = t[at(leaving, entering)];
    for (int c = 0; c < width; ++c) t[at(leaving, c)] /= pivot;
    for (int r = 0; r <= m; ++r) {
      if (r == leaving) continue;
      const double factor = t[at(r, entering)];
      if (std::fabs(factor) <= 0) continue;
      for (int c = 0; c < width; ++c) t[at(r, c)] -= factor * t[at(leaving, c)];
    }
    basis[static_cast<std::size_t>(leaving)] = entering;
  }
  solution.x.assign(static_cast<std::size_t>(n), 0.0);
  for (int r = 0; r < m; ++r) {
    const int column = basis[static_cast<std::size_t>(r)];
    if (column < n) solution.x[static_cast<std::size_t>(column)] = t[at(r, width - 1)];
  }
  solution.value = t[at(m, width - 1)];
  return solution;
}

}  // namespace linkfit::bench
