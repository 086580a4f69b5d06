#include "eval/task_reader.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"

namespace tandem::eval {

namespace {

using nlohmann::json;

constexpr std::string_view kFormat = "tandem-eval/1";

// One JSON object of the file. Every key must be taken, so a misspelt field is an error
// rather than a silently ignored one.
class Fields {
 public:
  Fields(const json& object, std::string where, std::string what)
      : object_(object), where_(std::move(where)), what_(std::move(what)) {}

  [[noreturn]] void bad(std::string_view why) const { fail("{}: {}: {}", where_, what_, why); }

  bool has(const char* key) const { return object_.contains(key); }

  const json& take(const char* key) {
    if (!has(key)) bad(fmt::format("'{}' is missing", key));
    taken_.insert(key);
    return object_.at(key);
  }

  std::string string(const char* key, bool allow_empty = false) {
    const json& v = take(key);
    if (!v.is_string()) bad(fmt::format("'{}' must be a string", key));
    std::string s = v.get<std::string>();
    if (s.empty() && !allow_empty) bad(fmt::format("'{}' must not be empty", key));
    return s;
  }

  std::vector<std::string> strings(const char* key, size_t min_size, bool allow_empty) {
    const json& v = take(key);
    if (!v.is_array()) bad(fmt::format("'{}' must be an array of strings", key));
    if (v.size() < min_size)
      bad(fmt::format("'{}' needs at least {} entries (has {})", key, min_size, v.size()));
    std::vector<std::string> out;
    for (const json& e : v) {
      if (!e.is_string()) bad(fmt::format("'{}' must be an array of strings", key));
      out.push_back(e.get<std::string>());
      if (out.back().empty() && !allow_empty)
        bad(fmt::format("'{}[{}]' must not be empty", key, out.size() - 1));
    }
    return out;
  }

  int64_t integer(const char* key, int64_t min, int64_t max) {
    const json& v = take(key);
    if (!v.is_number_integer()) bad(fmt::format("'{}' must be an integer", key));
    int64_t n = v.get<int64_t>();
    if (n < min || n > max) bad(fmt::format("'{}' is {}, outside {}..{}", key, n, min, max));
    return n;
  }

  // Keys nobody took: typos, or fields of another kind.
  void check_all_taken() const {
    for (auto it = object_.begin(); it != object_.end(); ++it)
      if (!taken_.count(it.key())) bad(fmt::format("unknown field '{}'", it.key()));
  }

 private:
  const json& object_;
  std::string where_, what_;
  std::set<std::string> taken_;
};

TaskKind parse_kind(Fields& f) {
  std::string kind = f.string("kind");
  if (kind == "choice") return TaskKind::Choice;
  if (kind == "generate") return TaskKind::Generate;
  if (kind == "perplexity") return TaskKind::Perplexity;
  f.bad(fmt::format("'kind' is '{}', not one of choice, generate, perplexity", kind));
}

std::optional<double> parse_chance(Fields& f, TaskKind kind) {
  const json& v = f.take("chance");
  if (kind == TaskKind::Perplexity) {
    if (v != "uniform")
      f.bad("'chance' of a perplexity task must be \"uniform\" (perplexity = vocabulary size)");
    return std::nullopt;
  }
  if (!v.is_number() || v.get<double>() < 0 || v.get<double>() > 1)
    f.bad("'chance' must be a number in [0, 1]: the accuracy of a random guess");
  return v.get<double>();
}

Task parse_header(Fields& f, const std::filesystem::path& origin) {
  if (f.string("format") != kFormat) f.bad(fmt::format("'format' must be \"{}\"", kFormat));
  Task t;
  t.file = origin;
  t.name = f.string("task");
  TaskKind kind = parse_kind(f);
  t.chance = parse_chance(f, kind);
  t.description = f.string("description");
  t.held_out = f.string("held_out");
  if (kind != TaskKind::Generate && f.has("stop")) f.bad("'stop' belongs to generate tasks");
  if (kind == TaskKind::Choice) {
    t.body = ChoiceTask{};
  } else if (kind == TaskKind::Generate) {
    GenerateTask g;
    g.max_tokens = int(f.integer("max_tokens", 1, 1 << 20));
    if (f.has("stop")) g.stop = f.strings("stop", 0, false);
    t.body = std::move(g);
  } else {
    PerplexityTask p;
    p.text_file = origin.parent_path() / f.string("text");
    if (!std::filesystem::is_regular_file(p.text_file))
      f.bad(fmt::format("'text' names {}, which is not a file", p.text_file.string()));
    if (f.has("window")) p.window = int(f.integer("window", 2, 1 << 24));
    t.body = std::move(p);
  }
  return t;
}

ChoiceItem parse_choice(Fields& f) {
  ChoiceItem item;
  if (f.has("choices") == f.has("contexts"))
    f.bad("give either 'context' + 'choices' or 'contexts' + 'continuation'");
  if (f.has("choices")) {
    std::string context = f.string("context");
    for (std::string& c : f.strings("choices", 2, false))
      item.options.push_back({context, std::move(c)});
  } else {
    std::string continuation = f.string("continuation");
    for (std::string& c : f.strings("contexts", 2, false))
      item.options.push_back({std::move(c), continuation});
  }
  item.gold = size_t(f.integer("gold", 0, int64_t(item.options.size()) - 1));
  return item;
}

GenerateItem parse_generate(Fields& f, const std::vector<std::string>& task_stop) {
  GenerateItem item;
  item.prompt = f.string("prompt");
  item.expected = f.string("expected", /*allow_empty=*/true);
  item.stop = f.has("stop") ? f.strings("stop", 0, false) : task_stop;
  return item;
}

void parse_item(Task& t, Fields& f, int line) {
  if (auto* c = std::get_if<ChoiceTask>(&t.body)) {
    c->items.push_back(parse_choice(f));
    c->items.back().line = line;
  } else if (auto* g = std::get_if<GenerateTask>(&t.body)) {
    g->items.push_back(parse_generate(f, g->stop));
    g->items.back().line = line;
  } else {
    f.bad("a perplexity task has no items (its text is the file named by 'text')");
  }
}

}  // namespace

const char* kind_name(TaskKind kind) {
  switch (kind) {
    case TaskKind::Choice:
      return "choice";
    case TaskKind::Generate:
      return "generate";
    case TaskKind::Perplexity:
      return "perplexity";
  }
  return "?";
}

Task parse_task(std::string_view text, const std::filesystem::path& origin) {
  std::optional<Task> task;
  std::istringstream in{std::string(text)};
  std::string line;
  for (int number = 1; std::getline(in, line); number++) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank lines
    std::string where = fmt::format("{}:{}", origin.string(), number);
    json object = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (object.is_discarded()) fail("{}: not a JSON value", where);
    if (!object.is_object()) fail("{}: each line must be a JSON object", where);
    if (!task) {
      Fields f(object, where, "header");
      task = parse_header(f, origin);
      f.check_all_taken();
      continue;
    }
    Fields f(object, where, fmt::format("{} item", kind_name(task->kind())));
    parse_item(*task, f, number);
    f.check_all_taken();
  }
  if (!task) fail("{}: empty task file (the first line is the header)", origin.string());
  auto* choice = std::get_if<ChoiceTask>(&task->body);
  auto* generate = std::get_if<GenerateTask>(&task->body);
  bool no_items = (choice && choice->items.empty()) || (generate && generate->items.empty());
  if (no_items) fail("{}: the task has a header but no items", origin.string());
  return std::move(*task);
}

Task read_task_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open the task file", path.string());
  std::stringstream text;
  text << in.rdbuf();
  return parse_task(text.str(), path);
}

}  // namespace tandem::eval
