// `tandem eval` end to end on the llama oracle model: task files in, the table on stdout,
// the raw numbers in --json equal to the scorer's own; a broken task file stops it before
// any model is loaded.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "eval/teacher_forced_scorer.h"

namespace tandem::eval {
namespace eval_command_test {

std::filesystem::path oracle_dir() {
  return std::filesystem::path(TANDEM_TEST_DATA) / "oracle" / "llama";
}

std::filesystem::path scratch() {
  auto dir = std::filesystem::temp_directory_path() / "tandem_eval_command";
  std::filesystem::create_directories(dir);
  return dir;
}

void write(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

// A choice task of one item with two choices; gold outside 0..1 makes it invalid.
void write_one_item_task(const std::filesystem::path& path, const std::string& name, int gold) {
  write(path, R"({"format": "tandem-eval/1", "task": ")" + name +
                  R"(", "kind": "choice", "chance": 0.5, "description": "d", "held_out": "h"})"
                  "\n"
                  R"({"context": "c", "choices": [" a", " b"], "gold": )" +
                  std::to_string(gold) + "}\n");
}

TEST(EvalCommand, RunsTasksAndWritesTheirRawScores) {
  auto dir = scratch();
  write(
      dir / "pick.jsonl",
      R"({"format": "tandem-eval/1", "task": "pick", "kind": "choice", "chance": 0.5, "description": "d", "held_out": "h"})"
      "\n"
      R"({"context": "The cat sat on the", "choices": [" mat", " moon"], "gold": 0})"
      "\n"
      R"({"contexts": ["one two", "three four"], "continuation": " five", "gold": 1})"
      "\n");
  write(
      dir / "say.jsonl",
      R"({"format": "tandem-eval/1", "task": "say", "kind": "generate", "chance": 0, "max_tokens": 4, "description": "d", "held_out": "h"})"
      "\n"
      R"({"prompt": "Hello", "expected": "not this"})"
      "\n");
  write(dir / "text.txt", "a short text to score, twice over; a short text to score, twice over.");
  write(
      dir / "ppl.jsonl",
      R"({"format": "tandem-eval/1", "task": "ppl", "kind": "perplexity", "chance": "uniform", "text": "text.txt", "window": 8, "description": "d", "held_out": "h"})"
      "\n");
  cli::EvalOptions o;
  o.model = oracle_dir().string();
  o.device = "cpu";
  o.tasks = {(dir / "pick.jsonl").string(), (dir / "say.jsonl").string(),
             (dir / "ppl.jsonl").string()};
  o.json = (dir / "out.json").string();
  o.scorer = "reference";  // the numbers below are the reference scorer's, exactly
  testing::internal::CaptureStdout();
  ASSERT_EQ(cli::run_eval(o), 0);
  std::string table = testing::internal::GetCapturedStdout();
  EXPECT_NE(table.find("acc_norm"), std::string::npos) << table;
  EXPECT_NE(table.find("exact_match"), std::string::npos) << table;
  EXPECT_NE(table.find("512.0"), std::string::npos) << table;  // perplexity chance: the vocabulary

  nlohmann::json j = nlohmann::json::parse(std::ifstream(dir / "out.json"));
  ASSERT_EQ(j["results"].size(), 3u);
  const auto& pick = j["results"][0];
  EXPECT_EQ(pick["task"], "pick");
  EXPECT_EQ(pick["n"], 2);
  ASSERT_EQ(pick["items"].size(), 2u);
  EXPECT_EQ(pick["items"][1]["line"], 3);

  auto backend = make_cpu_backend();
  auto model = load_model(oracle_dir(), *backend);
  TeacherForcedScorer scorer(*model, *backend, Tokenizer::load(oracle_dir()));
  std::vector<LoglikelihoodRequest> requests = {{"The cat sat on the", " mat"},
                                                {"The cat sat on the", " moon"},
                                                {"one two", " five"},
                                                {"three four", " five"}};
  std::vector<Loglikelihood> want = scorer.loglikelihood(requests);
  for (size_t i = 0; i < 4; i++)
    EXPECT_DOUBLE_EQ(pick["items"][i / 2]["logprobs"][i % 2].get<double>(), want[i].logprob);
  double acc =
      (double(want[0].logprob >= want[1].logprob) + double(want[3].logprob > want[2].logprob)) / 2;
  EXPECT_DOUBLE_EQ(pick["metrics"]["acc"]["value"].get<double>(), acc);
  EXPECT_EQ(pick["metrics"]["acc"]["chance"], 0.5);

  const auto& say = j["results"][1];
  EXPECT_EQ(say["items"][0]["output"],
            scorer.generate(std::vector<GenerateRequest>{{"Hello", {}, 4}})[0]);
  EXPECT_EQ(say["metrics"]["exact_match"]["value"], 0.0);

  const auto& ppl = j["results"][2];
  EXPECT_EQ(ppl["metrics"]["perplexity"]["chance"], 512.0);
  EXPECT_GE(ppl["windows"].size(), 2u);
  EXPECT_NEAR(std::log(ppl["metrics"]["perplexity"]["value"].get<double>()),
              ppl["metrics"]["nll"]["value"].get<double>(), 1e-12);
}

TEST(EvalCommand, ABrokenTaskStopsItBeforeTheModelLoads) {
  auto dir = scratch();
  write_one_item_task(dir / "broken.jsonl", "b", 7);
  cli::EvalOptions o;
  o.model = "/nonexistent/model";
  o.tasks = {(dir / "broken.jsonl").string()};
  testing::internal::CaptureStderr();
  EXPECT_EQ(cli::run_eval(o), 1);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("broken.jsonl:2: choice item: 'gold' is 7, outside 0..1"), std::string::npos)
      << err;
  EXPECT_EQ(err.find("/nonexistent/model"), std::string::npos) << err;

  o.tasks = {(dir / "broken.jsonl").string()};
  o.limit = 0;
  testing::internal::CaptureStderr();
  EXPECT_EQ(cli::run_eval(o), 1);
  EXPECT_NE(testing::internal::GetCapturedStderr().find("--limit must be at least 1"),
            std::string::npos);
}

TEST(EvalCommand, TaskNamesResolveInTheTasksFolder) {
  auto dir = scratch() / "named";
  std::filesystem::create_directories(dir);
  write_one_item_task(dir / "only.jsonl", "only", 0);
  cli::EvalOptions o;
  o.model = oracle_dir().string();
  o.device = "cpu";
  o.tasks_dir = dir.string();
  o.tasks = {"only"};
  testing::internal::CaptureStdout();
  EXPECT_EQ(cli::run_eval(o), 0);
  EXPECT_NE(testing::internal::GetCapturedStdout().find("only"), std::string::npos);
  o.tasks = {"absent"};
  testing::internal::CaptureStderr();
  EXPECT_EQ(cli::run_eval(o), 1);
  EXPECT_NE(testing::internal::GetCapturedStderr().find("absent.jsonl: cannot open the task file"),
            std::string::npos);
}

}  // namespace eval_command_test
}  // namespace tandem::eval
