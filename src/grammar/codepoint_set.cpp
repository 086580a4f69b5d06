#include "grammar/codepoint_set.h"

#include <algorithm>

namespace tandem::grammar {

namespace {

constexpr char32_t kSurrogateLo = 0xD800;
constexpr char32_t kSurrogateHi = 0xDFFF;

// The largest code point encoded in n bytes.
constexpr char32_t max_of_length(int n) {
  return n == 1 ? 0x7F : n == 2 ? 0x7FF : n == 3 ? 0xFFFF : kMaxCodepoint;
}

// Byte i (0-based) of the n-byte encoding of c.
uint8_t encoded_byte(char32_t c, int n, int i) {
  if (i == 0) {
    static constexpr uint8_t lead[5] = {0, 0x00, 0xC0, 0xE0, 0xF0};
    return uint8_t(lead[n] | (c >> (6 * (n - 1))));
  }
  return uint8_t(0x80 | ((c >> (6 * (n - 1 - i))) & 0x3F));
}

// Appends to out one byte-range sequence per piece of [lo, hi] (all of length n), splitting
// where the trailing bytes stop covering their full 80-BF range.
void encode_range(GrammarIr& ir, char32_t lo, char32_t hi, int n, std::vector<ExprId>& out) {
  for (int i = 1; i < n; ++i) {
    char32_t m = (char32_t(1) << (6 * (n - i))) - 1;  // the bits below byte i-1
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        encode_range(ir, lo, lo | m, n, out);
        encode_range(ir, (lo | m) + 1, hi, n, out);
        return;
      }
      if ((hi & m) != m) {
        encode_range(ir, lo, (hi & ~m) - 1, n, out);
        encode_range(ir, hi & ~m, hi, n, out);
        return;
      }
    }
  }
  std::vector<ExprId> parts;
  for (int i = 0; i < n; ++i)
    parts.push_back(ir.byte_range(encoded_byte(lo, n, i), encoded_byte(hi, n, i)));
  out.push_back(ir.seq(std::move(parts)));
}

}  // namespace

CodepointSet CodepointSet::range(char32_t lo, char32_t hi) {
  CodepointSet s;
  s.add(lo, hi);
  return s;
}

void CodepointSet::add(char32_t lo, char32_t hi) {
  hi = std::min(hi, kMaxCodepoint);
  if (lo > hi) return;
  // Surrogates are not scalar values: cut them out of the range.
  if (lo < kSurrogateLo && hi >= kSurrogateLo) {
    ranges_.emplace_back(lo, kSurrogateLo - 1);
    if (hi > kSurrogateHi) ranges_.emplace_back(kSurrogateHi + 1, hi);
  } else if (lo >= kSurrogateLo && lo <= kSurrogateHi) {
    if (hi > kSurrogateHi) ranges_.emplace_back(kSurrogateHi + 1, hi);
  } else {
    ranges_.emplace_back(lo, hi);
  }
  normalize();
}

void CodepointSet::add(const CodepointSet& other) {
  ranges_.insert(ranges_.end(), other.ranges_.begin(), other.ranges_.end());
  normalize();
}

void CodepointSet::normalize() {
  std::sort(ranges_.begin(), ranges_.end());
  std::vector<std::pair<char32_t, char32_t>> merged;
  for (auto r : ranges_) {
    if (!merged.empty() && r.first <= merged.back().second + 1)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  }
  ranges_ = std::move(merged);
}

CodepointSet CodepointSet::complement() const {
  CodepointSet out;
  char32_t next = 0;
  for (auto [lo, hi] : ranges_) {
    if (lo > next) out.add(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodepoint) out.add(next, kMaxCodepoint);
  return out;
}

CodepointSet CodepointSet::intersect(const CodepointSet& other) const {
  CodepointSet out;
  size_t i = 0, j = 0;
  while (i < ranges_.size() && j < other.ranges_.size()) {
    char32_t lo = std::max(ranges_[i].first, other.ranges_[j].first);
    char32_t hi = std::min(ranges_[i].second, other.ranges_[j].second);
    if (lo <= hi) out.ranges_.emplace_back(lo, hi);
    (ranges_[i].second < other.ranges_[j].second) ? ++i : ++j;
  }
  out.normalize();
  return out;
}

CodepointSet CodepointSet::minus(const CodepointSet& other) const {
  return intersect(other.complement());
}

bool CodepointSet::contains(char32_t c) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(),
                             std::make_pair(c, char32_t(kMaxCodepoint + 1)));
  return it != ranges_.begin() && std::prev(it)->second >= c;
}

ExprId utf8_expr(GrammarIr& ir, const CodepointSet& set) {
  std::vector<ExprId> options;
  for (auto [lo, hi] : set.ranges()) {
    char32_t start = lo;
    for (int n = 1; n <= 4 && start <= hi; ++n) {
      char32_t end = std::min(hi, max_of_length(n));
      if (start > end) continue;
      encode_range(ir, start, end, n, options);
      start = end + 1;
    }
  }
  return ir.alt(std::move(options));
}

std::string utf8_encode(char32_t c) {
  int n = c <= 0x7F ? 1 : c <= 0x7FF ? 2 : c <= 0xFFFF ? 3 : 4;
  std::string out;
  for (int i = 0; i < n; ++i) out.push_back(char(encoded_byte(c, n, i)));
  return out;
}

std::optional<char32_t> utf8_decode(std::string_view text, size_t& pos) {
  if (pos >= text.size()) return std::nullopt;
  uint8_t b0 = uint8_t(text[pos]);
  int n = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : (b0 >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || pos + n > text.size()) return std::nullopt;
  char32_t c = n == 1 ? b0 : (b0 & (0x7F >> n));
  for (int i = 1; i < n; ++i) {
    uint8_t b = uint8_t(text[pos + i]);
    if ((b & 0xC0) != 0x80) return std::nullopt;
    c = (c << 6) | (b & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
  if (c > kMaxCodepoint || (c >= kSurrogateLo && c <= kSurrogateHi) ||
      (n > 1 && c <= max_of_length(n - 1)))
    return std::nullopt;
  pos += n;
  return c;
}

}  // namespace tandem::grammar
