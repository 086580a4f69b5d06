// What a split does with the delimiters it finds (HF SplitDelimiterBehavior). Splitting
// "the-final--countdown" on '-':
//   Removed            the | final | countdown
//   Isolated           the | - | final | - | - | countdown
//   MergedWithPrevious the- | final- | - | countdown
//   MergedWithNext     the | -final | - | -countdown
//   Contiguous         the | - | final | -- | countdown
// HF folds over the whole list of segments; SplitStream gets the same pieces with O(1)
// state, segment by segment, so a huge input never builds the list.
#pragma once

#include <vector>

#include "tokenizer/json_fields.h"
#include "tokenizer/pattern.h"
#include "tokenizer/unicode.h"

namespace tandem::tok {

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

SplitBehavior parse_split_behavior(const json& j, const LoadContext& ctx);

// Feed the segments of a search (matches and gaps, in order) to add(), then call finish();
// emit(begin, end) receives the non-empty pieces the split keeps, in order. `emit` is a
// reference: the callable must outlive the stream.
class SplitStream {
 public:
  SplitStream(SplitBehavior behavior, SpanFn emit) : behavior_(behavior), emit_(emit) {}
  void add(const Segment& s);
  void finish() { flush(); }

 private:
  void flush();
  void emit(size_t begin, size_t end) {
    if (end > begin) emit_(begin, end);
  }

  SplitBehavior behavior_;
  SpanFn emit_;
  bool has_pending_ = false;  // a piece that may still grow
  Span pending_{0, 0};
  bool previous_match_ = false;
};

// The pieces as a list (for tests and small inputs).
void split_spans(const std::vector<Segment>& segments, SplitBehavior behavior,
                 std::vector<Span>& out);

// Segments where every character satisfying `pred` is a match of its own (HF's Pattern
// impl for `Fn(char) -> bool`).
template <typename Pred>
void for_each_char_segment(std::string_view text, Pred pred, SegmentFn fn) {
  if (text.empty()) {
    fn(Segment{0, 0, false});
    return;
  }
  size_t last = 0;
  for (size_t i = 0; i < text.size();) {
    size_t begin = i;
    char32_t c = next_char(text, i);
    if (!pred(c)) continue;
    if (last < begin) fn(Segment{last, begin, false});
    fn(Segment{begin, i, true});
    last = i;
  }
  if (last < text.size()) fn(Segment{last, text.size(), false});
}

template <typename Pred>
void char_segments(std::string_view text, Pred pred, std::vector<Segment>& out) {
  for_each_char_segment(text, pred, [&](const Segment& s) { out.push_back(s); });
}

}  // namespace tandem::tok
