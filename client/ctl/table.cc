// Text tables and number formatting for zshardctl.
#include "client/ctl/table.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"

namespace zshard::ctl {

std::string HumanBytes(int64_t bytes) {
  constexpr double kMiB = 1024.0 * 1024.0;
  constexpr double kGiB = kMiB * 1024.0;
  const double b = static_cast<double>(bytes);
  if (b >= kGiB) return absl::StrFormat("%.2f GiB", b / kGiB);
  return absl::StrFormat("%.2f MiB", b / kMiB);
}

std::string Grouped(int64_t value) {
  std::string digits = absl::StrFormat("%d", value);
  const size_t sign = value < 0 ? 1 : 0;
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    out.push_back(digits[i]);
    const size_t left = digits.size() - i - 1;
    if (i >= sign && left > 0 && left % 3 == 0) out.push_back(',');
  }
  return out;
}

Table::Table(std::vector<std::string> header) {
  rows_.push_back(std::move(header));
}

void Table::AddRow(std::vector<std::string> row) {
  rows_.push_back(std::move(row));
}

void Table::LeftAlign(size_t column) { left_.push_back(column); }

std::string Table::Render() const {
  std::vector<size_t> width;
  for (const auto& row : rows_) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t c = 0; c < row.size(); ++c) {
      width[c] = std::max(width[c], row[c].size());
    }
  }
  std::string out;
  for (const auto& row : rows_) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      if (c > 0) line += "  ";
      const std::string pad(width[c] - row[c].size(), ' ');
      const bool left =
          c == 0 || std::find(left_.begin(), left_.end(), c) != left_.end();
      line += left ? row[c] + pad : pad + row[c];
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace zshard::ctl
