#include "tokenizer/split_behavior.h"

namespace tandem::tok {

SplitBehavior parse_split_behavior(const json& j, const LoadContext& ctx) {
  if (!j.is_string()) ctx.fail("split behavior must be a string, got {}", j.dump());
  std::string s = j.get<std::string>();
  if (s == "Removed") return SplitBehavior::Removed;
  if (s == "Isolated") return SplitBehavior::Isolated;
  if (s == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (s == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (s == "Contiguous") return SplitBehavior::Contiguous;
  ctx.fail("unknown split behavior '{}'", s);
}

void SplitStream::flush() {
  if (has_pending_) emit(pending_.begin, pending_.end);
  has_pending_ = false;
}

void SplitStream::add(const Segment& s) {
  switch (behavior_) {
    case SplitBehavior::Isolated:
      emit(s.begin, s.end);
      return;
    case SplitBehavior::Removed:
      if (!s.is_match) emit(s.begin, s.end);
      return;
    case SplitBehavior::MergedWithPrevious:
    case SplitBehavior::Contiguous: {
      // HF: a segment joins the piece before it when it is a match following a non-match
      // (MergedWithPrevious) or has the same kind as the segment before (Contiguous).
      bool join = behavior_ == SplitBehavior::Contiguous ? s.is_match == previous_match_
                                                         : s.is_match && !previous_match_;
      if (join && has_pending_) {
        pending_.end = s.end;
      } else {
        flush();
        pending_ = {s.begin, s.end};
        has_pending_ = true;
      }
      previous_match_ = s.is_match;
      return;
    }
    case SplitBehavior::MergedWithNext:
      // HF folds backwards: a match joins the piece after it when that is a non-match. Going
      // forwards, a match waits as pending_ for the next segment.
      if (has_pending_) {
        has_pending_ = false;
        if (!s.is_match) return emit(pending_.begin, s.end);
        emit(pending_.begin, pending_.end);
      }
      if (s.is_match) {
        pending_ = {s.begin, s.end};
        has_pending_ = true;
      } else {
        emit(s.begin, s.end);
      }
      return;
  }
}

void split_spans(const std::vector<Segment>& segments, SplitBehavior behavior,
                 std::vector<Span>& out) {
  auto collect = [&](size_t begin, size_t end) { out.push_back({begin, end}); };
  SplitStream stream(behavior, collect);
  for (const Segment& s : segments) stream.add(s);
  stream.finish();
}

}  // namespace tandem::tok
