#include "engine/thinking_vocab.h"

#include "core/error.h"

namespace tandem {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

// The KMP automaton of `text`: delta[j][b] is how many bytes of text a stream ends with
// after byte b, given it ended with j of them. State text.size() (a match) steps like the
// longest proper border.
std::vector<std::array<uint32_t, 256>> kmp_delta(const std::string& text) {
  const size_t n = text.size();
  std::vector<std::array<uint32_t, 256>> delta(n + 1);
  uint32_t border = 0;  // the state after text[1..j) (what a mismatch at j falls back to)
  for (size_t j = 0; j <= n; ++j) {
    for (int b = 0; b < 256; ++b)
      delta[j][size_t(b)] = j < n && uint8_t(text[j]) == b ? uint32_t(j + 1)
                            : j == 0                       ? 0u
                                                           : delta[border][size_t(b)];
    if (j > 0 && j < n) border = delta[border][uint8_t(text[j])];
  }
  return delta;
}

}  // namespace

ThinkingVocab::ThinkingVocab(ThinkingVocabParams p)
    : bytes_(std::move(p.token_bytes)),
      eos_ids_(std::move(p.eos_ids)),
      start_(std::move(p.start)),
      end_(std::move(p.end)),
      forced_end_(std::move(p.forced_end)),
      max_space_(p.max_space_before_start) {
  TANDEM_CHECK(!start_.empty() && !end_.empty(), "thinking delimiters must not be empty");
  std::string forced;
  for (int32_t id : forced_end_) {
    TANDEM_CHECK(id >= 0 && id < num_tokens(), "forced end token {} is outside the vocabulary", id);
    forced += bytes_[size_t(id)];
  }
  TANDEM_CHECK(forced.ends_with(end_), "the forced end '{}' does not end with '{}'", forced, end_);
  end_delta_ = kmp_delta(end_);
  opening_.resize(start_.size());
  closing_.resize(end_.size());
  for (int32_t id = 0; id < num_tokens(); ++id) {
    const std::string& b = bytes_[size_t(id)];
    if (b.empty()) continue;
    for (size_t k = 0; k < start_.size(); ++k)
      if (std::string_view(start_).substr(k).starts_with(b))
        opening_[k].push_back({id, uint32_t(k + b.size())});
    bool all_space = true;
    for (char c : b) all_space = all_space && is_space(c);
    if (all_space && b.size() <= max_space_) spaces_.push_back({id, uint32_t(b.size())});
    for (uint32_t j = 0; j < end_.size(); ++j) {
      uint32_t s = j;
      for (size_t i = 0; i < b.size(); ++i) {
        s = end_delta_[s][uint8_t(b[i])];
        if (s == end_.size()) {
          closing_[j].push_back({id, uint32_t(i + 1)});
          break;
        }
      }
    }
  }
}

}  // namespace tandem
