// Pre-tokenizers that split on classes of characters rather than on a pattern.
#include <vector>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/split_behavior.h"
#include "tokenizer/unicode.h"

namespace tandem::tok {
namespace {

// Splits each piece where `pred` holds, with the given behavior.
template <typename Pred>
class CharClassSplit final : public PreTokenizer {
 public:
  CharClassSplit(Pred pred, SplitBehavior behavior) : pred_(pred), behavior_(behavior) {}

  void pre_tokenize(const Piece& piece, PieceSink sink) const override {
    auto emit = [&](size_t begin, size_t end) {
      sink(Piece{piece.text.substr(begin, end - begin), piece.at_origin && begin == 0});
    };
    SplitStream stream(behavior_, emit);
    auto add = [&](const Segment& s) { stream.add(s); };
    for_each_char_segment(piece.text, pred_, SegmentFn(add));
    stream.finish();
  }

 private:
  Pred pred_;
  SplitBehavior behavior_;
};

template <typename Pred>
std::unique_ptr<PreTokenizer> char_class_split(Pred pred, SplitBehavior behavior) {
  return std::make_unique<CharClassSplit<Pred>>(pred, behavior);
}

// HF's Whitespace: the matches of \w+|[^\w\s]+ (word runs and runs of other non-space
// characters); whitespace is dropped.
class WhitespacePreTokenizer final : public PreTokenizer {
 public:
  void pre_tokenize(const Piece& piece, PieceSink sink) const override {
    std::string_view text = piece.text;
    enum class Kind { Word, Other, Space };
    auto kind_of = [](char32_t c) {
      return is_word_char(c) ? Kind::Word : is_whitespace(c) ? Kind::Space : Kind::Other;
    };
    for (size_t i = 0; i < text.size();) {
      size_t begin = i;
      Kind kind = kind_of(next_char(text, i));
      if (kind == Kind::Space) continue;
      size_t end = i;
      while (end < text.size()) {
        size_t next = end;
        if (kind_of(next_char(text, next)) != kind) break;
        end = next;
      }
      sink(Piece{text.substr(begin, end - begin), piece.at_origin && begin == 0});
      i = end;
    }
  }
};

// BERT: split on whitespace (dropped), then isolate every punctuation character.
class BertPreTokenizer final : public PreTokenizer {
 public:
  void pre_tokenize(const Piece& piece, PieceSink sink) const override {
    auto punct = [&](const Piece& p) { by_punct_->pre_tokenize(p, sink); };
    by_space_->pre_tokenize(piece, PieceSink(punct));
  }

 private:
  std::unique_ptr<PreTokenizer> by_space_ = char_class_split(is_whitespace, SplitBehavior::Removed);
  std::unique_ptr<PreTokenizer> by_punct_ =
      char_class_split(is_punctuation, SplitBehavior::Isolated);
};

}  // namespace

std::unique_ptr<PreTokenizer> make_char_class_pre_tokenizer(const std::string& type, const json& j,
                                                            const LoadContext& ctx) {
  if (type == "Digits") {
    bool individual = bool_field(j, "individual_digits", false, ctx);
    return char_class_split(is_numeric,
                            individual ? SplitBehavior::Isolated : SplitBehavior::Contiguous);
  }
  if (type == "Whitespace") return std::make_unique<WhitespacePreTokenizer>();
  if (type == "WhitespaceSplit") return char_class_split(is_whitespace, SplitBehavior::Removed);
  if (type == "Punctuation") {
    auto it = j.find("behavior");
    SplitBehavior behavior =
        it == j.end() || it->is_null() ? SplitBehavior::Isolated : parse_split_behavior(*it, ctx);
    return char_class_split(is_punctuation, behavior);
  }
  if (type == "BertPreTokenizer") return std::make_unique<BertPreTokenizer>();
  if (type == "CharDelimiterSplit" || type == "Delimiter") {
    char32_t delimiter = char_field(j, "delimiter", ctx);
    return char_class_split([delimiter](char32_t c) { return c == delimiter; },
                            SplitBehavior::Removed);
  }
  return nullptr;
}

}  // namespace tandem::tok
