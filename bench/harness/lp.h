#pragma once

// A small dense simplex for the harness's upper bounds (openb_bound.h): maximise c.x subject to
// A x <= b, x >= 0, with b >= 0, so the origin is feasible and no first phase is needed. Dantzig's
// rule (largest reduced cost), Bland's rule after a run of degenerate pivots (no cycling); a
// tableau of rows x (columns + rows) doubles, meant for a few hundred rows and a few thousand
// columns. Written for the harness rather than taken from GLPK so that the bench builds with no
// new package: the problems it solves are small and their answers are checked by their tests.
//
// Thread-safety: a pure function.

#include <vector>

#include "linkfit/common/result.h"

namespace linkfit::bench {

struct LinearProgram {
  int columns = 0;
  std::vector<double> objective;          // size columns
  std::vector<std::vector<double>> rows;  // each of size columns
  std::vector<double> bounds;             // b, one per row, each >= 0
};

struct LpSolution {
  double value = 0;
  std::vector<double> x;  // size columns
  int pivots = 0;
};

// Errors on a malformed program (sizes, a negative bound), an unbounded objective, or when the
// pivot limit (100 x (rows + columns)) is reached.
Result<LpSolution> Maximise(const LinearProgram& program);

}  // namespace linkfit::bench
