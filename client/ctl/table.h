// Text tables and number formatting for zshardctl's human output.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zshard::ctl {

// "1.50 GiB" at or above 1 GiB, else "12.00 MiB".
std::string HumanBytes(int64_t bytes);
// "6,738,415,616".
std::string Grouped(int64_t value);

// A table with a header row; columns are left-aligned in the first column
// (and in columns passed to LeftAlign) and right-aligned elsewhere,
// separated by two spaces.
class Table {
 public:
  explicit Table(std::vector<std::string> header);
  void AddRow(std::vector<std::string> row);
  // Aligns `column` (0-based) to the left, like the first; for text.
  void LeftAlign(size_t column);
  // The rendered table, one line per row, each ending in '\n'.
  std::string Render() const;

 private:
  std::vector<std::vector<std::string>> rows_;
  std::vector<size_t> left_;  // left-aligned columns besides the first
};

}  // namespace zshard::ctl
