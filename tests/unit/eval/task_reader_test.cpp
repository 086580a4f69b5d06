// The task reader: each kind parses into what the file says, and every malformed file is
// an error naming file:line and the field.
#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "eval/task_reader.h"

namespace tandem::eval {
namespace task_reader_test {

const std::filesystem::path kOrigin = "/tasks/t.jsonl";

std::string header(const std::string& kind, const std::string& extra = "") {
  std::string chance = kind == "perplexity" ? "\"uniform\"" : "0.25";
  return R"({"format": "tandem-eval/1", "task": "t", "kind": ")" + kind + R"(", "chance": )" +
         chance + R"(, "description": "d", "held_out": "h")" + extra + "}\n";
}

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  return s.replace(s.find(from), from.size(), to);
}

// The message of the error parse_task throws for `text` (fails the test when none).
std::string error_of(const std::string& text) {
  try {
    parse_task(text, kOrigin);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for:\n" << text;
  return "";
}

TEST(TaskReader, ChoiceItemsOfBothForms) {
  Task t =
      parse_task(header("choice") + R"({"context": "c", "choices": [" a", " b", " c"], "gold": 2})"
                                    "\n\n"
                                    R"({"contexts": ["x:", "y:"], "continuation": " z", "gold": 0})"
                                    "\n",
                 kOrigin);
  EXPECT_EQ(t.name, "t");
  EXPECT_EQ(t.kind(), TaskKind::Choice);
  ASSERT_TRUE(t.chance.has_value());
  EXPECT_DOUBLE_EQ(*t.chance, 0.25);
  const auto& items = std::get<ChoiceTask>(t.body).items;
  ASSERT_EQ(items.size(), 2u);
  ASSERT_EQ(items[0].options.size(), 3u);
  EXPECT_EQ(items[0].options[1].context, "c");
  EXPECT_EQ(items[0].options[1].continuation, " b");
  EXPECT_EQ(items[0].gold, 2u);
  EXPECT_EQ(items[0].line, 2);
  EXPECT_EQ(items[1].options[1].context, "y:");
  EXPECT_EQ(items[1].options[1].continuation, " z");
  EXPECT_EQ(items[1].line, 4);  // the blank line 3 is skipped but counted
}

TEST(TaskReader, GenerateItemsTakeTheTaskStopUnlessTheyHaveTheirOwn) {
  Task t = parse_task(header("generate", R"(, "max_tokens": 8, "stop": ["\n"])") +
                          R"({"prompt": "p", "expected": "e"})"
                          "\n"
                          R"({"prompt": "q", "expected": "", "stop": [".", "!"]})"
                          "\n",
                      kOrigin);
  const auto& g = std::get<GenerateTask>(t.body);
  EXPECT_EQ(g.max_tokens, 8);
  ASSERT_EQ(g.items.size(), 2u);
  EXPECT_EQ(g.items[0].stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(g.items[1].stop, (std::vector<std::string>{".", "!"}));
  EXPECT_EQ(g.items[1].expected, "");
}

TEST(TaskReader, PerplexityResolvesItsTextBesideTheTaskFile) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "tandem_eval_reader";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "text.txt") << "some text";
  Task t =
      parse_task(header("perplexity", R"(, "text": "text.txt", "window": 64)"), dir / "p.jsonl");
  const auto& p = std::get<PerplexityTask>(t.body);
  EXPECT_EQ(p.text_file, dir / "text.txt");
  EXPECT_EQ(p.window, 64);
  EXPECT_FALSE(t.chance.has_value());
  EXPECT_NE(error_of(header("perplexity", R"(, "text": "missing.txt")"))
                .find("missing.txt, which is not a file"),
            std::string::npos);
}

TEST(TaskReader, ErrorsNameFileLineAndField) {
  const std::string choice = header("choice");
  struct Case {
    std::string text, expected;
  };
  std::vector<Case> cases = {
      {"", "/tasks/t.jsonl: empty task file"},
      {choice, "/tasks/t.jsonl: the task has a header but no items"},
      {"not json\n", "/tasks/t.jsonl:1: not a JSON value"},
      {"[1, 2]\n", "/tasks/t.jsonl:1: each line must be a JSON object"},
      {R"({"format": "tandem-eval/2"})"
       "\n",
       "/tasks/t.jsonl:1: header: 'format' must be \"tandem-eval/1\""},
      {header("multiple"),
       "/tasks/t.jsonl:1: header: 'kind' is 'multiple', not one of choice, generate, perplexity"},
      {header("choice", R"(, "colour": 1)"), "/tasks/t.jsonl:1: header: unknown field 'colour'"},
      {header("choice", R"(, "stop": ["\n"])"),
       "/tasks/t.jsonl:1: header: 'stop' belongs to generate tasks"},
      {header("generate"), "/tasks/t.jsonl:1: header: 'max_tokens' is missing"},
      {header("generate", R"(, "max_tokens": 0)"),
       "/tasks/t.jsonl:1: header: 'max_tokens' is 0, outside 1..1048576"},
      {replaced(header("perplexity", R"(, "text": "x")"), "\"uniform\"", "0.5"),
       "/tasks/t.jsonl:1: header: 'chance' of a perplexity task must be \"uniform\""},
      {replaced(header("choice"), "0.25", "2"),
       "/tasks/t.jsonl:1: header: 'chance' must be a number in [0, 1]"},
      {choice + R"({"context": "c", "choices": [" a", " b"], "gold": 2})",
       "/tasks/t.jsonl:2: choice item: 'gold' is 2, outside 0..1"},
      {choice + "\n" + R"({"context": "c", "choices": [" a"], "gold": 0})",
       "/tasks/t.jsonl:3: choice item: 'choices' needs at least 2 entries (has 1)"},
      {choice + R"({"context": "c", "choices": [" a", ""], "gold": 0})",
       "/tasks/t.jsonl:2: choice item: 'choices[1]' must not be empty"},
      {choice + R"({"context": "", "choices": [" a", " b"], "gold": 0})",
       "/tasks/t.jsonl:2: choice item: 'context' must not be empty"},
      {choice +
           R"({"context": "c", "choices": [" a", " b"], "contexts": ["x", "y"], "continuation": "z", "gold": 0})",
       "/tasks/t.jsonl:2: choice item: give either 'context' + 'choices' or 'contexts' + "
       "'continuation'"},
      {choice + R"({"context": "c", "choices": [" a", " b"], "gold": 0, "answer": 1})",
       "/tasks/t.jsonl:2: choice item: unknown field 'answer'"},
      {choice + R"({"context": "c", "choices": [" a", 3], "gold": 0})",
       "/tasks/t.jsonl:2: choice item: 'choices' must be an array of strings"},
      {header("generate", R"(, "max_tokens": 4)") + R"({"prompt": "p"})",
       "/tasks/t.jsonl:2: generate item: 'expected' is missing"},
      {header("generate", R"(, "max_tokens": 4)") + R"({"prompt": 5, "expected": "e"})",
       "/tasks/t.jsonl:2: generate item: 'prompt' must be a string"},
  };
  for (const Case& c : cases) {
    std::string message = error_of(c.text);
    EXPECT_EQ(message.rfind(c.expected, 0), 0u) << "got: " << message << "\nwant: " << c.expected;
  }
}

TEST(TaskReader, PerplexityTasksHaveNoItems) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "tandem_eval_reader";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "text.txt") << "some text";
  try {
    parse_task(header("perplexity", R"(, "text": "text.txt")") + R"({"text": "x"})"
                                                                 "\n",
               dir / "p.jsonl");
    FAIL() << "an item in a perplexity task was accepted";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("p.jsonl:2: perplexity item: a perplexity task has no items"),
        std::string::npos)
        << e.what();
  }
}

TEST(TaskReader, MissingFileIsAnError) {
  EXPECT_THROW(read_task_file("/nonexistent/task.jsonl"), Error);
}

TEST(TaskReader, TheCommittedTasksParse) {
  std::filesystem::path dir =
      std::filesystem::path(TANDEM_TEST_DATA) / ".." / ".." / "eval" / "tasks";
  int num_tasks = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".jsonl") continue;
    Task t = read_task_file(entry.path());
    EXPECT_EQ(t.name, entry.path().stem().string());
    num_tasks++;
  }
  EXPECT_EQ(num_tasks, 6);
}

}  // namespace task_reader_test
}  // namespace tandem::eval
