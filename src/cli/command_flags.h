// The subcommands of `tandem` and their flags (CLI11). A flag that several commands take is
// declared by one helper, so it reads the same on each: the model to load
// (add_model_flags), the KV cache's element type, a LoRA adapter, prefix caching and the CPU
// backend's threads. main() is the table of subcommands; each add_*_command declares one.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "cli/bench/bench_options.h"
#include "cli/commands.h"

namespace tandem::cli {

// What the command line fills in; main() runs the one subcommand that was given.
struct CommandLine {
  ServeOptions serve;
  LogitsOptions logits;
  GenerateOptions generate;
  PerplexityOptions perplexity;
  EvalOptions eval;
  TextToolOptions text_tools;  // tokenize, detokenize and chat-template share them
  RandomModelOptions random_model;
  RandomLoraOptions random_lora;
  QuantizeOptions quantize;
  BenchOptions bench;
  int threads = 0;  // --threads (0: the physical cores)
};

// What --model means on one command.
struct ModelFlag {
  const char* help;
  bool required = false;
};

inline constexpr const char* kDeviceHelp = "cpu, cuda, or auto: cuda when a GPU is present";
inline constexpr const char* kQuantizationHelp =
    "Quantize a 16-bit checkpoint at load: none or fp8 (e4m3 per-channel weights, dynamic "
    "per-token activations)";

inline constexpr const char* kTensorParallelHelp =
    "Split the model over N tensor-parallel ranks (-tp N; CPU ranks: threads of this "
    "process; --device cuda: GPUs 0..N-1 through NCCL; docs/tensor-parallel.md)";

// --model, --device, --quantization and --tensor-parallel-size, on a command that loads a
// model. `o` is one of commands.h's option structs: they name these fields alike.
template <class Options>
void add_model_flags(CLI::App& cmd, Options& o, const ModelFlag& model) {
  CLI::Option* flag = cmd.add_option("--model", o.model, model.help);
  if (model.required) flag->required();
  cmd.add_option("--device", o.device, kDeviceHelp)->capture_default_str();
  cmd.add_option("--quantization", o.quantization, kQuantizationHelp);
  cmd.add_option("--tensor-parallel-size", o.tensor_parallel_size, kTensorParallelHelp)
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
}

// The command line as CLI11 parses it (App::parse's reversed vector, without the program
// name), with the aliases CLI11 cannot declare spelled out: "-tp N" and "-tp=N" (CLI11
// takes one-letter short flags only) become --tensor-parallel-size.
std::vector<std::string> cli_args(int argc, const char* const* argv);

void add_kv_cache_dtype_flag(CLI::App& cmd, std::string& dtype);
void add_lora_flag(CLI::App& cmd, std::optional<std::string>& lora);
void add_prefix_caching_flag(CLI::App& cmd, bool& enabled);
// A tokenizer folder that replaces the model's own.
void add_tokenizer_flag(CLI::App& cmd, std::optional<std::string>& tokenizer);
void add_speculative_flag(CLI::App& cmd, std::optional<std::string>& json);
// The CPU backend's thread pool, on every command that runs a model.
void add_threads_flag(CLI::App& cmd, int& threads);

// One subcommand each, with its flags, filling `line`; in --help's order.
CLI::App* add_serve_command(CLI::App& app, CommandLine& line);
CLI::App* add_logits_command(CLI::App& app, CommandLine& line);
CLI::App* add_generate_command(CLI::App& app, CommandLine& line);
CLI::App* add_perplexity_command(CLI::App& app, CommandLine& line);
CLI::App* add_eval_command(CLI::App& app, CommandLine& line);
CLI::App* add_tokenize_command(CLI::App& app, CommandLine& line);
CLI::App* add_detokenize_command(CLI::App& app, CommandLine& line);
CLI::App* add_chat_template_command(CLI::App& app, CommandLine& line);
CLI::App* add_random_model_command(CLI::App& app, CommandLine& line);
CLI::App* add_random_lora_command(CLI::App& app, CommandLine& line);
CLI::App* add_quantize_command(CLI::App& app, CommandLine& line);
CLI::App* add_bench_command(CLI::App& app, CommandLine& line);

}  // namespace tandem::cli
