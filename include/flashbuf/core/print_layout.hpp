// Core layer, host only: draws 2-D layouts as ASCII grids (like CuTe's print_layout), for
// the comments that document buffer layouts, for test failure messages and for people at
// a debugger. Not included by device code.
//
//   to_ascii(row_major(2, 3)):          to_ascii_banks(row_major(2, 64), 2, Swizzle<3,3,3>{})
//          0   1   2                    prints each element's bank instead of its offset.
//       +---+---+---+
//     0 | 0 | 1 | 2 |
//       +---+---+---+
//     1 | 3 | 4 | 5 |
//       +---+---+---+
#pragma once

#include <string>

#include "flashbuf/core/bank_conflicts.hpp"
#include "flashbuf/core/layout.hpp"
#include "flashbuf/core/swizzle.hpp"

namespace flashbuf {

namespace detail {

inline int decimal_width(int v) {
  int width = v < 0 ? 2 : 1;
  for (int x = v < 0 ? -v : v; x >= 10; x /= 10) ++width;
  return width;
}

inline std::string pad_left(const std::string& s, int width) {
  return std::string(width > static_cast<int>(s.size()) ? width - s.size() : 0, ' ') + s;
}

// Grid of value(r, c) for r < rows, c < cols, with row and column indices on the edges.
template <class ValueFn>
std::string ascii_grid(int rows, int cols, ValueFn value) {
  int cell = 1;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const int w = decimal_width(value(r, c));
      cell = w > cell ? w : cell;
    }
  const int col_label = decimal_width(cols > 0 ? cols - 1 : 0);
  cell = col_label > cell ? col_label : cell;
  const int row_label = decimal_width(rows > 0 ? rows - 1 : 0);

  std::string rule = std::string(row_label + 1, ' ') + "+";
  for (int c = 0; c < cols; ++c) rule += std::string(cell + 2, '-') + "+";
  rule += "\n";

  std::string out = std::string(row_label + 1, ' ');
  for (int c = 0; c < cols; ++c) out += "  " + pad_left(std::to_string(c), cell) + " ";
  out += "\n" + rule;
  for (int r = 0; r < rows; ++r) {
    out += pad_left(std::to_string(r), row_label) + " |";
    for (int c = 0; c < cols; ++c) out += " " + pad_left(std::to_string(value(r, c)), cell) + " |";
    out += "\n" + rule;
  }
  return out;
}

}  // namespace detail

// Offsets of a 2-D layout.
inline std::string to_ascii(const Layout<2>& layout) {
  return detail::ascii_grid(layout.shape[0], layout.shape[1],
                            [&](int r, int c) { return layout(r, c); });
}

// Offsets after a swizzle (any callable int -> int, e.g. Swizzle<3,3,3>{}).
template <class SwizzleFn>
std::string to_ascii(const Layout<2>& layout, SwizzleFn swizzle) {
  return detail::ascii_grid(layout.shape[0], layout.shape[1],
                            [&](int r, int c) { return swizzle(layout(r, c)); });
}

// Offsets of a blocked layout.
inline std::string to_ascii(const BlockedLayout2& layout) {
  return detail::ascii_grid(layout.rows(), layout.cols(),
                            [&](int r, int c) { return layout(r, c); });
}

// The shared-memory bank (0..31) of each element after a swizzle, for elements of
// `elem_bytes` stored from a 128-byte-aligned base.
template <class SwizzleFn = NoSwizzle>
std::string to_ascii_banks(const Layout<2>& layout, int elem_bytes, SwizzleFn swizzle = {}) {
  return detail::ascii_grid(layout.shape[0], layout.shape[1], [&](int r, int c) {
    return (swizzle(layout(r, c)) * elem_bytes / kSmemBankBytes) % kSmemBanks;
  });
}

}  // namespace flashbuf
