#include "engine/stop_matcher.h"

#include <algorithm>

namespace tandem {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (auto& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

std::string StopMatcher::push(std::string_view text) {
  if (matched_) return {};
  pending_ += text;
  // The earliest complete stop string wins.
  size_t best = std::string::npos;
  for (auto& s : stops_) {
    size_t at = pending_.find(s);
    if (at < best) {
      best = at;
      matched_ = s;
    }
  }
  if (best != std::string::npos) {
    std::string out = pending_.substr(0, best);
    pending_.clear();
    return out;
  }
  // Hold back the longest suffix that is a prefix of some stop string.
  size_t hold = 0;
  for (auto& s : stops_)
    for (size_t n = std::min(s.size() - 1, pending_.size()); n > hold; n--)
      if (pending_.compare(pending_.size() - n, n, s, 0, n) == 0) {
        hold = n;
        break;
      }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopMatcher::flush() {
  if (matched_) return {};
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace tandem
