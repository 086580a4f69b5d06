#include "tokenizer/pre_tokenizer.h"

#include <string>
#include <vector>

#include "tokenizer/byte_level.h"
#include "tokenizer/pattern.h"
#include "tokenizer/split_behavior.h"
#include "tokenizer/unicode.h"

namespace tandem::tok {
namespace {

// Splits `piece` along `segments` (a generator calling its argument with each segment)
// with `behavior` and hands each kept part to the sink; only a part at offset 0 keeps
// `at_origin`.
template <typename Generate>
void split_piece(const Piece& piece, SplitBehavior behavior, Generate&& segments, PieceSink sink) {
  auto emit = [&](size_t begin, size_t end) {
    sink(Piece{piece.text.substr(begin, end - begin), piece.at_origin && begin == 0});
  };
  SplitStream stream(behavior, emit);
  auto add = [&](const Segment& s) { stream.add(s); };
  segments(SegmentFn(add));
  stream.finish();
}

const Regex& gpt2_regex() {
  static const Regex re(
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)");
  return re;
}

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space), use_regex_(use_regex) {}

  void pre_tokenize(const Piece& piece, PieceSink sink) const override {
    std::string prefixed;
    std::string_view text = piece.text;
    if (add_prefix_space_ && text.front() != ' ') {
      prefixed.reserve(text.size() + 1);
      prefixed.append(" ").append(text);
      text = prefixed;
    }
    std::string mapped;
    auto emit = [&](size_t begin, size_t end) {
      mapped.clear();
      append_byte_level(mapped, text.substr(begin, end - begin));
      sink(Piece{mapped, piece.at_origin && begin == 0});
    };
    if (!use_regex_) return emit(0, text.size());
    // Isolated split: matches and the gaps between them, in order.
    size_t prev = 0;
    gpt2_regex().for_each_match(text, [&](size_t begin, size_t end) {
      if (prev < begin) emit(prev, begin);
      if (begin < end) emit(begin, end);
      prev = end;
    });
    if (prev < text.size()) emit(prev, text.size());
  }

 private:
  bool add_prefix_space_, use_regex_;
};

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(Pattern pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}

  void pre_tokenize(const Piece& piece, PieceSink sink) const override {
    split_piece(
        piece, behavior_,
        [&](SegmentFn add) {
          auto flip = [&](const Segment& s) {
            add(Segment{s.begin, s.end, s.is_match != invert_});
          };
          pattern_.for_each_segment(piece.text, flip);
        },
        sink);
  }

 private:
  Pattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

enum class PrependScheme { Always, First, Never };

class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  MetaspacePreTokenizer(char32_t replacement, PrependScheme scheme, bool split)
      : replacement_(replacement), scheme_(scheme), split_(split) {
    append_utf8(replacement_utf8_, replacement);
  }

  void pre_tokenize(const Piece& piece, PieceSink sink) const override {
    bool starts_with_rep = piece.text.front() == ' ' || piece.text.starts_with(replacement_utf8_);
    bool prepend = !starts_with_rep && (scheme_ == PrependScheme::Always ||
                                        (scheme_ == PrependScheme::First && piece.at_origin));
    std::string text;
    text.reserve(piece.text.size() + 8);
    if (prepend) text += replacement_utf8_;
    for (char ch : piece.text) {
      if (ch == ' ')
        text += replacement_utf8_;
      else
        text.push_back(ch);
    }
    Piece replaced{text, piece.at_origin};
    if (!split_) return sink(replaced);
    char32_t rep = replacement_;
    split_piece(
        replaced, SplitBehavior::MergedWithNext,
        [&](SegmentFn add) {
          for_each_char_segment(
              text, [rep](char32_t c) { return c == rep; }, add);
        },
        sink);
  }

 private:
  char32_t replacement_;
  std::string replacement_utf8_;
  PrependScheme scheme_;
  bool split_;
};

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps)
      : steps_(std::move(steps)) {}

  void pre_tokenize(const Piece& piece, PieceSink sink) const override { run(0, piece, sink); }

 private:
  // Stage k's output feeds stage k + 1, depth first; past the last stage, the sink.
  void run(size_t k, const Piece& piece, PieceSink sink) const {
    if (k == steps_.size()) return sink(piece);
    auto next = [&](const Piece& p) { run(k + 1, p, sink); };
    steps_[k]->pre_tokenize(piece, PieceSink(next));
  }

  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

PrependScheme parse_prepend_scheme(const json& j, const LoadContext& ctx) {
  if (bool_field(j, "add_prefix_space", true, ctx) == false) return PrependScheme::Never;
  auto it = j.find("prepend_scheme");
  if (it == j.end() || it->is_null()) return PrependScheme::Always;
  std::string s = it->is_string() ? it->get<std::string>() : it->dump();
  if (s == "always") return PrependScheme::Always;
  if (s == "first") return PrependScheme::First;
  if (s == "never") return PrependScheme::Never;
  ctx.fail("unknown Metaspace prepend_scheme '{}'", s);
}

std::unique_ptr<PreTokenizer> make_pre_tokenizer_sequence(const json& j, const LoadContext& ctx) {
  const json& list = require_field(j, "pretokenizers", ctx);
  if (!list.is_array()) ctx.fail("\"pretokenizers\" must be an array");
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  for (const json& item : list)
    if (auto step = make_pre_tokenizer(item, ctx)) steps.push_back(std::move(step));
  return std::make_unique<SequencePreTokenizer>(std::move(steps));
}

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json& j, const LoadContext& ctx) {
  if (j.is_null()) return nullptr;
  std::string type = component_type(j, ctx);
  if (type == "ByteLevel")
    return std::make_unique<ByteLevelPreTokenizer>(bool_field(j, "add_prefix_space", true, ctx),
                                                   bool_field(j, "use_regex", true, ctx));
  if (type == "Split")
    return std::make_unique<SplitPreTokenizer>(
        Pattern::from_json(require_field(j, "pattern", ctx), ctx),
        parse_split_behavior(require_field(j, "behavior", ctx), ctx),
        bool_field(j, "invert", false, ctx));
  if (type == "Metaspace")
    return std::make_unique<MetaspacePreTokenizer>(char_field(j, "replacement", ctx),
                                                   parse_prepend_scheme(j, ctx),
                                                   bool_field(j, "split", true, ctx));
  if (type == "Sequence") return make_pre_tokenizer_sequence(j, ctx);
  if (auto simple = make_char_class_pre_tokenizer(type, j, ctx)) return simple;
  ctx.fail(
      "unknown type '{}' (supported: ByteLevel, Split, Metaspace, Digits, Whitespace, "
      "WhitespaceSplit, Punctuation, BertPreTokenizer, CharDelimiterSplit, Sequence)",
      type);
}

}  // namespace tandem::tok
