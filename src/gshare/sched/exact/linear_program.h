// LinearProgram: columns and rows of a (mixed-integer) linear program, built up in plain vectors
// and handed to a COIN-OR solver in one call.
//
// Internal to the exact solver. Rows are lower <= sum(coefficient * column) <= upper; infinite
// bounds are kInfinity. Not thread-safe; cheap to build, one per solve.
#pragma once

#include <string>
#include <utility>
#include <vector>

class ClpSimplex;
class OsiSolverInterface;

namespace gshare::exact {

inline constexpr double kInfinity = 1e30;

struct Term {
  int column;
  double coefficient;
};

class LinearProgram {
 public:
  // Adds a column and returns its index.
  int AddColumn(double lower, double upper, double objective, bool integer, std::string name);
  int AddBinary(std::string name) { return AddColumn(0, 1, 0, true, std::move(name)); }
  void AddRow(const std::vector<Term>& terms, double lower, double upper);

  // The smallest value sum(terms) can take within the column bounds.
  double MinimumOf(const std::vector<Term>& terms) const;

  int num_columns() const { return static_cast<int>(lower_.size()); }
  int num_rows() const { return static_cast<int>(row_lower_.size()); }
  int num_integers() const;
  double lower(int column) const { return lower_[column]; }
  double upper(int column) const { return upper_[column]; }
  const std::string& name(int column) const { return names_[column]; }

  // Loads the program (as a minimization) into a solver; integers are marked where the solver
  // supports them (an OsiSolverInterface; ClpSimplex is continuous only).
  void LoadInto(ClpSimplex& solver) const;
  void LoadInto(OsiSolverInterface& solver) const;

 private:
  std::vector<double> lower_, upper_, objective_;
  std::vector<bool> integer_;
  std::vector<std::string> names_;
  std::vector<int> entry_row_, entry_column_;
  std::vector<double> entry_value_;
  std::vector<double> row_lower_, row_upper_;
};

}  // namespace gshare::exact
