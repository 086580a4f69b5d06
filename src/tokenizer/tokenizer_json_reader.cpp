#include "tokenizer/tokenizer_json_reader.h"

namespace tandem::tok {
namespace {

// Builds the DOM, except that model.vocab and model.merges stream into a BpeSource.
class Reader final : public nlohmann::json_sax<json> {
 public:
  explicit Reader(TokenizerJson& out) : out_(out) {}
  const std::string& error() const { return error_; }

  bool null() override { return scalar(nullptr); }
  bool boolean(bool v) override { return scalar(v); }
  bool number_float(number_float_t v, const string_t&) override { return scalar(v); }
  bool binary(binary_t&) override { return fail("unexpected binary value"); }

  bool number_integer(number_integer_t v) override { return integer(v); }
  bool number_unsigned(number_unsigned_t v) override {
    return integer(v > uint64_t(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(v));
  }

  bool string(string_t& s) override {
    switch (mode_) {
      case Mode::Vocab:
        return fail(fmt::format("vocab['{}'] must be an integer id", token_));
      case Mode::Merges:
        return legacy_merge(s);
      case Mode::MergePair:
        pair_.push_back(std::move(s));
        return true;
      case Mode::Dom:
        place(std::move(s));
        return true;
    }
    return true;
  }

  bool key(string_t& k) override {
    if (mode_ == Mode::Vocab)
      token_ = std::move(k);
    else
      keys_.back() = std::move(k);
    return true;
  }

  bool start_object(std::size_t) override {
    if (mode_ != Mode::Dom) return fail("unexpected object inside vocab or merges");
    if (at_model_member("vocab")) {
      mode_ = Mode::Vocab;
      out_.source.has_vocab = true;
      return true;
    }
    push(place(json::object()));
    return true;
  }

  bool end_object() override {
    if (mode_ == Mode::Vocab) {
      place(nullptr);
      mode_ = Mode::Dom;
    } else {
      pop();
    }
    return true;
  }

  bool start_array(std::size_t) override {
    switch (mode_) {
      case Mode::Vocab:
        return fail(fmt::format("vocab['{}'] must be an integer id", token_));
      case Mode::MergePair:
        return fail(fmt::format("merges[{}] nests arrays", merge_index_));
      case Mode::Merges:
        mode_ = Mode::MergePair;
        pair_.clear();
        return true;
      case Mode::Dom:
        if (at_model_member("merges")) {
          mode_ = Mode::Merges;
          out_.source.has_merges = true;
          return true;
        }
        push(place(json::array()));
        return true;
    }
    return true;
  }

  bool end_array() override {
    switch (mode_) {
      case Mode::MergePair:
        if (pair_.size() != 2)
          return fail(fmt::format("merges[{}] must be [\"a\", \"b\"]", merge_index_));
        out_.source.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
        ++merge_index_;
        mode_ = Mode::Merges;
        return true;
      case Mode::Merges:
        place(nullptr);
        mode_ = Mode::Dom;
        return true;
      default:
        pop();
        return true;
    }
  }

  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& e) override {
    error_ = fmt::format("invalid JSON at byte {}: {}", position, e.what());
    return false;
  }

 private:
  enum class Mode { Dom, Vocab, Merges, MergePair };

  bool fail(std::string message) {
    error_ = "model: " + std::move(message);
    return false;
  }

  // The next value is model.<name>: the stack is [root, model].
  bool at_model_member(std::string_view name) const {
    return stack_.size() == 2 && keys_[0] == "model" && keys_[1] == name;
  }

  bool scalar(json v) {
    if (mode_ != Mode::Dom) return fail("unexpected value inside vocab or merges");
    place(std::move(v));
    return true;
  }

  bool integer(int64_t v) {
    if (mode_ == Mode::Vocab) {
      out_.source.vocab.emplace_back(std::move(token_), v);
      return true;
    }
    return scalar(v);
  }

  bool legacy_merge(const std::string& line) {
    if (line.starts_with("#version")) return true;
    std::pair<std::string, std::string> merge;
    if (!split_legacy_merge(line, merge))
      return fail(fmt::format("merges[{}] '{}' is not two tokens separated by one space",
                              merge_index_, line));
    out_.source.merges.push_back(std::move(merge));
    ++merge_index_;
    return true;
  }

  // Stores v where the DOM expects the next value; returns where it went.
  json* place(json v) {
    if (stack_.empty()) {
      out_.doc = std::move(v);
      return &out_.doc;
    }
    json& top = *stack_.back();
    if (top.is_object()) {
      json& slot = top[keys_.back()];
      slot = std::move(v);
      return &slot;
    }
    top.push_back(std::move(v));
    return &top.back();
  }

  void push(json* container) {
    stack_.push_back(container);
    keys_.emplace_back();
  }
  void pop() {
    stack_.pop_back();
    keys_.pop_back();
  }

  TokenizerJson& out_;
  std::string error_;
  std::vector<json*> stack_;       // open containers; a container's address is stable
  std::vector<std::string> keys_;  // per open container: its pending key (objects)
  Mode mode_ = Mode::Dom;
  std::string token_;              // Vocab: the key awaiting its id
  std::vector<std::string> pair_;  // MergePair: the strings so far
  size_t merge_index_ = 0;
};

}  // namespace

bool split_legacy_merge(std::string_view line, std::pair<std::string, std::string>& out) {
  size_t space = line.find(' ');
  if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos)
    return false;
  out = {std::string(line.substr(0, space)), std::string(line.substr(space + 1))};
  return true;
}

TokenizerJson read_tokenizer_json(std::string_view text, std::string_view origin) {
  TokenizerJson out;
  Reader reader(out);
  if (!json::sax_parse(text.begin(), text.end(), &reader))
    fail("{}: {}", origin, reader.error().empty() ? "invalid JSON" : reader.error());
  return out;
}

BpeSource bpe_source_from_json(const json& model, const LoadContext& ctx) {
  BpeSource s;
  if (auto it = model.find("vocab"); it != model.end() && !it->is_null()) {
    if (!it->is_object()) ctx.fail("\"vocab\" must be an object of token -> id");
    s.has_vocab = true;
    s.vocab.reserve(it->size());
    for (const auto& [token, value] : it->items()) {
      if (!value.is_number_integer()) ctx.fail("vocab['{}'] must be an integer id", token);
      s.vocab.emplace_back(token, value.get<int64_t>());
    }
  }
  if (auto it = model.find("merges"); it != model.end() && !it->is_null()) {
    if (!it->is_array()) ctx.fail("\"merges\" must be an array");
    s.has_merges = true;
    for (size_t i = 0; i < it->size(); ++i) {
      const json& item = (*it)[i];
      std::pair<std::string, std::string> merge;
      if (item.is_string()) {
        const std::string& line = item.get_ref<const std::string&>();
        if (line.starts_with("#version")) continue;
        if (!split_legacy_merge(line, merge))
          ctx.fail("merges[{}] '{}' is not two tokens separated by one space", i, line);
      } else if (item.is_array() && item.size() == 2 && item[0].is_string() &&
                 item[1].is_string()) {
        merge = {item[0].get<std::string>(), item[1].get<std::string>()};
      } else {
        ctx.fail("merges[{}] must be \"a b\" or [\"a\", \"b\"], got {}", i, item.dump());
      }
      s.merges.push_back(std::move(merge));
    }
  }
  return s;
}

}  // namespace tandem::tok
