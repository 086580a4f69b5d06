// tandem: an LLM inference server. This file only picks the subcommand; each one's flags are
// in src/cli/command_flags.cpp and its work in src/cli/.
#include <CLI/CLI.hpp>

#include <functional>
#include <utility>

#include "cli/command_flags.h"
#include "cli/env_switches.h"

using namespace tandem::cli;

int main(int argc, char** argv) {
  CLI::App app{"tandem: serve many LLM requests at once (continuous batching, paged KV cache)"};
  app.require_subcommand(1);
  CommandLine line;
  // The subcommands, in --help's order, and what each runs.
  const std::pair<CLI::App*, std::function<int()>> commands[] = {
      {add_serve_command(app, line), [&] { return run_serve(line.serve); }},
      {add_logits_command(app, line), [&] { return run_logits(line.logits); }},
      {add_generate_command(app, line), [&] { return run_generate(line.generate); }},
      {add_perplexity_command(app, line), [&] { return run_perplexity(line.perplexity); }},
      {add_eval_command(app, line), [&] { return run_eval(line.eval); }},
      {add_tokenize_command(app, line), [&] { return run_tokenize(line.text_tools); }},
      {add_detokenize_command(app, line), [&] { return run_detokenize(line.text_tools); }},
      {add_chat_template_command(app, line), [&] { return run_chat_template(line.text_tools); }},
      {add_random_model_command(app, line), [&] { return run_random_model(line.random_model); }},
      {add_random_lora_command(app, line), [&] { return run_random_lora(line.random_lora); }},
      {add_quantize_command(app, line), [&] { return run_quantize(line.quantize); }},
      {add_bench_command(app, line), [&] { return run_bench(line.bench); }},
  };
  try {
    app.parse(cli_args(argc, argv));  // with -tp spelled out
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  // TANDEM_THREADS, TANDEM_CPU_ISA, --threads
  if (!apply_process_switches(line.threads)) return 1;
  if (line.serve.model.empty()) line.serve.model = default_model_dir();
  if (line.generate.model.empty()) line.generate.model = default_model_dir();
  if (line.eval.model.empty() && !line.eval.url) line.eval.model = default_model_dir();
  for (const auto& [cmd, run] : commands)
    if (*cmd) return run();
  return 1;
}
