#include "grammar/json_pieces.h"

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "grammar/grammar_error.h"
#include "grammar/numeric_range.h"

namespace tandem::grammar {

namespace {

ExprId hex_digit(GrammarIr& ir) {
  return ir.alt({ir.byte_range('0', '9'), ir.byte_range('a', 'f'), ir.byte_range('A', 'F')});
}

// Four hex digits that do not name a surrogate (D800-DFFF).
ExprId hex4_scalar(GrammarIr& ir) {
  ExprId h = hex_digit(ir);
  ExprId not_d = ir.alt({ir.byte_range('0', '9'), ir.byte_range('a', 'c'), ir.byte_range('e', 'f'),
                         ir.byte_range('A', 'C'), ir.byte_range('E', 'F')});
  ExprId d = ir.alt({ir.literal("d"), ir.literal("D")});
  return ir.alt({ir.seq({not_d, h, h, h}), ir.seq({d, ir.byte_range('0', '7'), h, h})});
}

// The escape JSON requires for a character outside the raw set.
std::string required_escape(char32_t c) {
  switch (c) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case '\b':
      return "\\b";
    case '\f':
      return "\\f";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default:
      return fmt::format("\\u{:04x}", uint32_t(c));
  }
}

struct NameTrie {
  bool is_name = false;
  std::map<char32_t, std::unique_ptr<NameTrie>> children;
};

}  // namespace

CodepointSet json_raw_chars() {
  CodepointSet s = CodepointSet::range(0x20, kMaxCodepoint);
  CodepointSet special;
  special.add('"', '"');
  special.add('\\', '\\');
  return s.minus(special);
}

ExprId JsonPieces::ws() {
  if (options_.max_whitespace == 0) return ir_.empty();
  ByteSet space;
  for (char c : {' ', '\t', '\n', '\r'}) space.set(uint8_t(c));
  return ir_.repeat(ir_.bytes(space), 0, options_.max_whitespace);
}

ExprId JsonPieces::punct(char c) {
  return ir_.seq({ws(), ir_.literal(std::string(1, c)), ws()});
}

ExprId JsonPieces::string_char() {
  // Inline, not a rule: a string's characters then run in the string's own frame, which
  // the mask cache shares between every place the string appears (mask_cache.h).
  if (!string_char_) {
    ByteSet simple;
    for (char c : std::string_view("\"\\/bfnrt")) simple.set(uint8_t(c));
    ExprId escape =
        ir_.seq({ir_.literal("\\"),
                 ir_.alt({ir_.bytes(simple), ir_.seq({ir_.literal("u"), hex4_scalar(ir_)})})});
    string_char_ = ir_.alt({utf8_expr(ir_, json_raw_chars()), escape});
  }
  return *string_char_;
}

ExprId JsonPieces::any_string() {
  return string_of_length(0, std::nullopt);
}

ExprId JsonPieces::string_of_length(uint32_t min, std::optional<uint32_t> max) {
  return ir_.seq({ir_.literal("\""), ir_.repeat(string_char(), min, max), ir_.literal("\"")});
}

ExprId JsonPieces::any_integer() {
  if (!integer_rule_) {
    integer_rule_ = ir_.add_rule("JSON integer");
    ir_.set_body(*integer_rule_, integer_range(ir_, std::nullopt, std::nullopt));
  }
  return ir_.ref(*integer_rule_);
}

ExprId JsonPieces::any_number() {
  if (!number_rule_) {
    number_rule_ = ir_.add_rule("JSON number");
    ir_.set_body(*number_rule_, any_json_number(ir_));
  }
  return ir_.ref(*number_rule_);
}

RuleId JsonPieces::value_rule() {
  if (!value_rule_) {
    value_rule_ = ir_.add_rule("JSON value");
    ir_.set_body(*value_rule_,
                 ir_.alt({any_object(), any_array(), any_string(), any_number(),
                          ir_.literal("true"), ir_.literal("false"), ir_.literal("null")}));
  }
  return *value_rule_;
}

ExprId JsonPieces::any_value() {
  return ir_.ref(value_rule());
}

ExprId JsonPieces::any_object() {
  ExprId member = ir_.seq({any_string(), punct(':'), any_value()});
  ExprId members = ir_.seq({member, ir_.star(ir_.seq({punct(','), member}))});
  return ir_.seq({ir_.literal("{"), ws(), ir_.optional(members), ws(), ir_.literal("}")});
}

ExprId JsonPieces::any_array() {
  ExprId items = ir_.seq({any_value(), ir_.star(ir_.seq({punct(','), any_value()}))});
  return ir_.seq({ir_.literal("["), ws(), ir_.optional(items), ws(), ir_.literal("]")});
}

ExprId JsonPieces::literal_value(const nlohmann::ordered_json& v, const std::string& path,
                                 const std::string& keyword) {
  try {
    return ir_.literal(v.dump());
  } catch (const nlohmann::json::exception&) {
    grammar_fail(path, keyword, "the value holds a string that is not valid UTF-8");
  }
}

ExprId JsonPieces::key_other_than(const std::vector<std::string>& names) {
  CodepointSet raw = json_raw_chars();
  NameTrie root;
  for (const std::string& name : names) {
    NameTrie* node = &root;
    bool writable = true;  // a name needing escapes never equals a raw key
    for (size_t pos = 0; pos < name.size() && writable;) {
      std::optional<char32_t> c = utf8_decode(name, pos);
      if (!c || !raw.contains(*c))
        writable = false;
      else
        node = (node->children[*c] ? node->children[*c]
                                   : node->children[*c] = std::make_unique<NameTrie>())
                   .get();
    }
    if (writable) node->is_name = true;
  }
  ExprId any_rest = ir_.star(utf8_expr(ir_, raw));
  std::function<ExprId(const NameTrie&)> other = [&](const NameTrie& node) {
    CodepointSet next;
    std::vector<ExprId> options = {node.is_name ? ir_.nothing() : ir_.empty()};
    for (const auto& [c, child] : node.children) {
      next.add(c, c);
      options.push_back(ir_.seq({ir_.literal(utf8_encode(c)), other(*child)}));
    }
    options.push_back(ir_.seq({utf8_expr(ir_, raw.minus(next)), any_rest}));
    return ir_.alt(std::move(options));
  };
  return ir_.seq({ir_.literal("\""), other(root), ir_.literal("\"")});
}

CharEncoder JsonPieces::string_encoder() const {
  return [](GrammarIr& ir, const CodepointSet& set) {
    CodepointSet raw = json_raw_chars();
    std::vector<ExprId> options = {utf8_expr(ir, set.intersect(raw))};
    CodepointSet escaped = set.minus(raw);
    for (auto [lo, hi] : escaped.ranges())
      for (char32_t c = lo; c <= hi; ++c) options.push_back(ir.literal(required_escape(c)));
    return ir.alt(std::move(options));
  };
}

}  // namespace tandem::grammar
