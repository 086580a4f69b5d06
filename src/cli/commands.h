// The subcommands of the `tandem` binary. main.cpp parses flags (CLI11) into these
// option structs; each run_* returns the process exit code and reports errors itself.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tandem::cli {

struct LogitsOptions {
  std::string model;
  std::string ids;  // "1,2,3"
  std::string out;  // .npy path
};
int run_logits(const LogitsOptions& o);

struct GenerateOptions {
  std::string model;
  std::optional<std::string> prompt;
  std::optional<std::string> ids;
  int max_tokens = 64;
  float temperature = 0.f;
  int top_k = 0;
  float top_p = 1.f;
  float min_p = 0.f;
  std::optional<uint64_t> seed;
  bool json = false;
  bool ignore_eos = false;
};
int run_generate(const GenerateOptions& o);

struct PerplexityOptions {
  std::string model;
  std::string file;
  int context = 0;  // window length; 0 = the model's max_position_embeddings
};
int run_perplexity(const PerplexityOptions& o);

struct RandomModelOptions {
  std::optional<std::string> like;
  std::optional<std::string> config;
  std::string out;
  std::string dtype = "bf16";
  uint64_t seed = 1;
};
int run_random_model(const RandomModelOptions& o);
// Names accepted by --like.
std::string random_model_presets();

}  // namespace tandem::cli
