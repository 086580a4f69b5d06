#include "tokenizer/decoder.h"

#include <optional>

#include "tokenizer/byte_level.h"
#include "tokenizer/pattern.h"
#include "tokenizer/unicode.h"

namespace tandem::tok {
namespace {

// prefix + s (std::string::insert(0, ...) trips a GCC 12 -Wrestrict false positive).
std::string prepended(std::string_view prefix, std::string_view s) {
  std::string out;
  out.reserve(prefix.size() + s.size());
  out.append(prefix).append(s);
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The byte of "<0xNN>" (Rust's u8::from_str_radix also takes a '+' sign: "<0x+A>").
std::optional<unsigned char> byte_token_value(std::string_view t) {
  if (t.size() != 6 || !t.starts_with("<0x") || t.back() != '>') return std::nullopt;
  int hi = t[3] == '+' ? 0 : hex_value(t[3]), lo = hex_value(t[4]);
  if (hi < 0 || lo < 0) return std::nullopt;
  return static_cast<unsigned char>(hi * 16 + lo);
}

class ByteLevelDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens, DecodeContext& ctx) const override {
    std::string bytes;
    for (const std::string& t : tokens) append_token_bytes(bytes, t);
    tokens.assign(1, to_valid_utf8(bytes));
    ctx.fused = true;
  }
  void add_traits(DecoderTraits& t) const override { t.byte_level = true; }
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(char32_t replacement, bool drop_first)
      : replacement_(replacement), drop_first_(drop_first) {}
  void decode_chain(std::vector<std::string>& tokens, DecodeContext& ctx) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      // HF drops every replacement character of the first token, not only a leading one.
      bool drop = i == 0 && ctx.at_start && drop_first_;
      std::string out;
      const std::string& t = tokens[i];
      for (size_t k = 0; k < t.size();) {
        size_t begin = k;
        if (next_char(t, k) != replacement_)
          out.append(t, begin, k - begin);
        else if (!drop)
          out.push_back(' ');
      }
      tokens[i] = std::move(out);
    }
  }

 private:
  char32_t replacement_;
  bool drop_first_;
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens, DecodeContext&) const override {
    std::vector<Segment> segments;
    for (std::string& t : tokens) {
      segments.clear();
      pattern_.find_segments(t, segments);
      std::string out;
      for (const Segment& s : segments)
        out += s.is_match ? std::string_view(content_)
                          : std::string_view(t).substr(s.begin, s.end - s.begin);
      t = std::move(out);
    }
  }

 private:
  Pattern pattern_;
  std::string content_;
};

class ByteFallbackDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens, DecodeContext&) const override {
    std::vector<std::string> out;
    std::string run;  // bytes of consecutive <0xNN> tokens
    size_t run_tokens = 0;
    auto flush = [&] {
      if (run_tokens == 0) return;
      // A run that is not valid UTF-8 as a whole becomes one U+FFFD per byte token.
      if (is_valid_utf8(run))
        out.push_back(run);
      else
        for (size_t k = 0; k < run_tokens; ++k) out.emplace_back(kReplacementUtf8);
      run.clear();
      run_tokens = 0;
    };
    for (std::string& t : tokens) {
      if (auto b = byte_token_value(t)) {
        run.push_back(static_cast<char>(*b));
        ++run_tokens;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }
  void add_traits(DecoderTraits& t) const override { t.byte_fallback = true; }
};

class FuseDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens, DecodeContext& ctx) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, std::move(all));
    ctx.fused = true;
  }
};

class StripDecoder final : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop)
      : content_(content), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens, DecodeContext& ctx) const override {
    // Once fused, the single token is a window of the whole text: its ends are the text's
    // ends only where the window's are.
    size_t start = ctx.fused && !ctx.at_start ? 0 : start_;
    size_t stop = ctx.fused && !ctx.at_end ? 0 : stop_;
    for (std::string& t : tokens) strip(t, start, stop);
  }
  void add_traits(DecoderTraits& t) const override { t.end_sensitive |= stop_ > 0; }

 private:
  void strip(std::string& t, size_t start, size_t stop) const {
    std::u32string chars;
    for (size_t i = 0; i < t.size();) chars.push_back(next_char(t, i));
    size_t begin = 0, end = chars.size();
    while (begin < start && begin < end && chars[begin] == content_) ++begin;
    for (size_t k = 0; k < stop && end > begin && chars[end - 1] == content_; ++k) --end;
    std::string out;
    for (size_t i = begin; i < end; ++i) append_utf8(out, chars[i]);
    t = std::move(out);
  }

  char32_t content_;
  size_t start_, stop_;
};

class WordPieceDecoder final : public Decoder {
 public:
  WordPieceDecoder(std::string prefix, bool cleanup)
      : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void decode_chain(std::vector<std::string>& tokens, DecodeContext& ctx) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      if (i > 0 || !ctx.at_start) {
        if (t.starts_with(prefix_))
          t.erase(0, prefix_.size());
        else
          t = prepended(" ", t);
      }
      if (cleanup_) t = cleanup(t);
    }
  }

 private:
  static std::string cleanup(std::string s) {
    static const std::pair<std::string_view, std::string_view> kRules[] = {
        {" .", "."},   {" ?", "?"},     {" !", "!"},    {" ,", ","},
        {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},  {" do not", " don't"},
        {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    for (const auto& [from, to] : kRules) {
      std::string out;
      size_t at = 0;
      for (size_t hit; (hit = s.find(from, at)) != std::string::npos; at = hit + from.size())
        out.append(s, at, hit - at).append(to);
      s = out.append(s, at);
    }
    return s;
  }

  std::string prefix_;
  bool cleanup_;
};

class BpeSuffixDecoder final : public Decoder {
 public:
  explicit BpeSuffixDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(std::vector<std::string>& tokens, DecodeContext& ctx) const override {
    if (suffix_.empty()) return;
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string_view with = i + 1 == tokens.size() && ctx.at_end ? "" : " ";
      std::string& t = tokens[i];
      std::string out;
      size_t at = 0;
      for (size_t hit; (hit = t.find(suffix_, at)) != std::string::npos; at = hit + suffix_.size())
        out.append(t, at, hit - at).append(with);
      t = out.append(t, at);
    }
  }
  void add_traits(DecoderTraits& t) const override { t.end_sensitive = true; }

 private:
  std::string suffix_;
};

// No decoder: HF joins the tokens with single spaces.
class JoinWithSpaces final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens, DecodeContext& ctx) const override {
    for (size_t i = 0; i < tokens.size(); ++i)
      if (i > 0 || !ctx.at_start) tokens[i] = prepended(" ", tokens[i]);
  }
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps)
      : steps_(std::move(steps)) {}
  void decode_chain(std::vector<std::string>& tokens, DecodeContext& ctx) const override {
    for (const auto& s : steps_) s->decode_chain(tokens, ctx);
  }
  void add_traits(DecoderTraits& t) const override {
    for (const auto& s : steps_) s->add_traits(t);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

bool metaspace_drops_first(const json& j, const LoadContext& ctx) {
  if (!bool_field(j, "add_prefix_space", true, ctx)) return false;
  auto it = j.find("prepend_scheme");
  return it == j.end() || !it->is_string() || it->get<std::string>() != "never";
}

std::unique_ptr<Decoder> make_decoder_sequence(const json& j, const LoadContext& ctx) {
  const json& list = require_field(j, "decoders", ctx);
  if (!list.is_array()) ctx.fail("\"decoders\" must be an array");
  std::vector<std::unique_ptr<Decoder>> steps;
  for (const json& item : list) {
    if (item.is_null()) continue;
    steps.push_back(make_decoder(item, ctx));
  }
  return std::make_unique<SequenceDecoder>(std::move(steps));
}

}  // namespace

bool is_byte_token(std::string_view token) {
  return byte_token_value(token).has_value();
}

std::unique_ptr<Decoder> make_decoder(const json& j, const LoadContext& ctx) {
  if (j.is_null()) return std::make_unique<JoinWithSpaces>();
  std::string type = component_type(j, ctx);
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Metaspace")
    return std::make_unique<MetaspaceDecoder>(char_field(j, "replacement", ctx),
                                              metaspace_drops_first(j, ctx));
  if (type == "Replace")
    return std::make_unique<ReplaceDecoder>(
        Pattern::from_json(require_field(j, "pattern", ctx), ctx),
        require_string(j, "content", ctx));
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip")
    return std::make_unique<StripDecoder>(char_field(j, "content", ctx),
                                          static_cast<size_t>(int_field(j, "start", 0, ctx)),
                                          static_cast<size_t>(int_field(j, "stop", 0, ctx)));
  if (type == "WordPiece") {
    auto it = j.find("prefix");
    std::string prefix = it != j.end() && it->is_string() ? it->get<std::string>() : "##";
    return std::make_unique<WordPieceDecoder>(prefix, bool_field(j, "cleanup", true, ctx));
  }
  if (type == "BPEDecoder") {
    auto it = j.find("suffix");
    return std::make_unique<BpeSuffixDecoder>(
        it != j.end() && it->is_string() ? it->get<std::string>() : "</w>");
  }
  if (type == "Sequence") return make_decoder_sequence(j, ctx);
  ctx.fail(
      "unknown type '{}' (supported: ByteLevel, Metaspace, Replace, ByteFallback, Fuse, "
      "Strip, WordPiece, BPEDecoder, Sequence)",
      type);
}

}  // namespace tandem::tok
