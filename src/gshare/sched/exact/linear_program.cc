#include "gshare/sched/exact/linear_program.h"

#include <ClpSimplex.hpp>
#include <CoinPackedMatrix.hpp>
#include <OsiSolverInterface.hpp>

namespace gshare::exact {
namespace {

CoinPackedMatrix MakeMatrix(const std::vector<int>& rows, const std::vector<int>& columns,
                            const std::vector<double>& values, int num_rows, int num_columns) {
  CoinPackedMatrix matrix(true, rows.data(), columns.data(), values.data(),
                          static_cast<CoinBigIndex>(values.size()));
  // Trailing empty rows or columns are not implied by the triples; make the shape explicit.
  matrix.setDimensions(num_rows, num_columns);
  return matrix;
}

}  // namespace

int LinearProgram::AddColumn(double lower, double upper, double objective, bool integer,
                             std::string name) {
  lower_.push_back(lower);
  upper_.push_back(upper);
  objective_.push_back(objective);
  integer_.push_back(integer);
  names_.push_back(std::move(name));
  return num_columns() - 1;
}

void LinearProgram::AddRow(const std::vector<Term>& terms, double lower, double upper) {
  const int row = num_rows();
  for (const Term& term : terms) {
    if (term.coefficient == 0) continue;
    entry_row_.push_back(row);
    entry_column_.push_back(term.column);
    entry_value_.push_back(term.coefficient);
  }
  row_lower_.push_back(lower);
  row_upper_.push_back(upper);
}

double LinearProgram::MinimumOf(const std::vector<Term>& terms) const {
  double minimum = 0;
  for (const Term& term : terms) {
    minimum +=
        term.coefficient * (term.coefficient > 0 ? lower_[term.column] : upper_[term.column]);
  }
  return minimum;
}

int LinearProgram::num_integers() const {
  int count = 0;
  for (const bool integer : integer_) count += integer ? 1 : 0;
  return count;
}

void LinearProgram::LoadInto(ClpSimplex& solver) const {
  const CoinPackedMatrix matrix =
      MakeMatrix(entry_row_, entry_column_, entry_value_, num_rows(), num_columns());
  solver.loadProblem(matrix, lower_.data(), upper_.data(), objective_.data(), row_lower_.data(),
                     row_upper_.data());
}

void LinearProgram::LoadInto(OsiSolverInterface& solver) const {
  const CoinPackedMatrix matrix =
      MakeMatrix(entry_row_, entry_column_, entry_value_, num_rows(), num_columns());
  solver.loadProblem(matrix, lower_.data(), upper_.data(), objective_.data(), row_lower_.data(),
                     row_upper_.data());
  for (int column = 0; column < num_columns(); ++column) {
    if (integer_[column]) solver.setInteger(column);
    solver.setColName(column, names_[column]);
  }
  // CBC 2.10's preprocessing reads row names whenever column names are set (coin-or/Cbc#515).
  for (int row = 0; row < num_rows(); ++row) solver.setRowName(row, "r" + std::to_string(row));
}

}  // namespace gshare::exact
