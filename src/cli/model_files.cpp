#include "cli/model_files.h"

#include <algorithm>

#include "backend/cpu/cpu_backend.h"
#include "model/config.h"
#include "model/lora/peft_adapter.h"

#include "cli/commands.h"
#include "cli/env_switches.h"
#include "engine/tensor_parallel_executor.h"

#include <charconv>

#include <nlohmann/json.hpp>
#include <regex>

#include "core/error.h"
#include "loader/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace tandem::cli {

namespace {

// The CPU backend with the environment's block arithmetic (TANDEM_CPU_BLOCK_ARITHMETIC).
std::unique_ptr<Backend> make_cpu(const EnvSwitches& env) {
  auto be = std::make_unique<CpuBackend>();
  if (!env.cpu_block_arithmetic.empty()) {
    const auto a = cpu::block_arithmetic_from_name(env.cpu_block_arithmetic);
    if (!a)
      fail("TANDEM_CPU_BLOCK_ARITHMETIC: '{}' is not exact or int8", env.cpu_block_arithmetic);
    be->set_block_arithmetic(*a);
  }
  return be;
}

}  // namespace

std::unique_ptr<Backend> make_backend(const std::string& device) {
  const EnvSwitches& env = env_switches();
  const CudaOptions& cuda = env.cuda;
  if (device == "cpu") return make_cpu(env);
  if (device == "cuda") return make_cuda_backend(0, cuda);
  if (device == "auto") return cuda_device_count() > 0 ? make_cuda_backend(0, cuda) : make_cpu(env);
  fail("--device: '{}' is not one of cpu, cuda, auto", device);
}

std::vector<std::pair<std::string, std::filesystem::path>> parse_lora_modules(
    const std::vector<std::string>& entries) {
  std::vector<std::pair<std::string, std::filesystem::path>> out;
  for (const std::string& e : entries) {
    size_t eq = e.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == e.size())
      fail("--lora-modules: '{}' is not name=DIR", e);
    out.emplace_back(e.substr(0, eq), e.substr(eq + 1));
  }
  return out;
}

LoraCapacity lora_capacity_for(const std::vector<std::filesystem::path>& dirs, int max_loras,
                               int max_rank) {
  LoraCapacity c{.max_loras = std::max(max_loras, int(dirs.size())), .max_rank = max_rank};
  for (auto& d : dirs) c.max_rank = std::max(c.max_rank, load_peft_adapter(d).max_rank());
  return c;
}

LoadedModel load_model_folder(const std::filesystem::path& dir, const std::string& device,
                              const LoadOptions& options,
                              const std::optional<std::string>& tokenizer) {
  const bool gguf = is_gguf_file(dir);
  if (!gguf && !std::filesystem::is_directory(dir))
    fail("{}: neither a model folder nor a GGUF file", dir.string());
  if (tokenizer && !std::filesystem::exists(std::filesystem::path(*tokenizer) / "tokenizer.json"))
    fail("--tokenizer {}: no tokenizer.json there", *tokenizer);
  LoadedModel m;
  m.backend = make_backend(device);
  // Rank 0 into m.model, the others beside it (engine/tp_ranks.h); TANDEM_TP_EXECUTOR makes
  // a group of one rank too.
  if (options.tp.sharded() || env_switches().tp_executor)
    m.tp_ranks =
        TpRanks::load(dir, options.tp.size, options, *m.backend, m.model, env_switches().cuda);
  else
    m.model = load_model(dir, *m.backend, options);
  m.weight_format = weight_format_name(*m.model, options.online);
  const std::filesystem::path source = tokenizer_source(dir.string(), tokenizer);
  if (tokenizer || gguf || std::filesystem::exists(source / "tokenizer.json"))
    m.tokenizer = Tokenizer::load(source);
  return m;
}

std::filesystem::path tokenizer_source(const std::string& model,
                                       const std::optional<std::string>& tokenizer) {
  return tokenizer ? std::filesystem::path(*tokenizer) : std::filesystem::path(model);
}

std::string default_served_name(const std::string& model) {
  std::filesystem::path p = std::filesystem::path(model).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // "dir/"
  std::string name = p.filename().string();
  if (name.size() > 5 && name.ends_with(".gguf")) {
    name.resize(name.size() - 5);
    static const std::regex kShard(R"((.*)-\d{5}-of-\d{5})");
    std::smatch m;
    if (std::regex_match(name, m, kShard)) name = m[1];
  }
  return name.empty() ? "tandem" : name;
}

void load_draft_model(LoadedModel& m, const SpeculativeConfig& config) {
  if (config.method != SpecMethod::DraftModel) return;
  const std::filesystem::path dir = config.model;
  if (!std::filesystem::is_directory(dir))
    fail("--speculative-config: \"model\" {} is not a model folder", dir.string());
  m.draft = load_model(dir, *m.backend);
  const int target_vocab = m.model->config().vocab_size, draft_vocab = m.draft->config().vocab_size;
  if (draft_vocab != target_vocab)
    fail(
        "--speculative-config: the draft {} has a vocabulary of {} tokens, the model {}: a draft "
        "must share the model's tokenizer",
        dir.string(), draft_vocab, target_vocab);
  if (!m.tokenizer || !std::filesystem::exists(dir / "tokenizer.json")) return;
  const std::vector<std::string> mine = m.tokenizer->token_bytes();
  const std::vector<std::string> theirs = Tokenizer::load(dir / "tokenizer.json")->token_bytes();
  for (size_t id = 0; id < std::max(mine.size(), theirs.size()); id++) {
    const std::string a = id < mine.size() ? mine[id] : "",
                      b = id < theirs.size() ? theirs[id] : "";
    if (a != b)
      fail(
          "--speculative-config: the draft {} has another tokenizer: token {} is '{}' there, '{}' "
          "in the model",
          dir.string(), id, b, a);
  }
}

std::unique_ptr<Engine> make_engine(LoadedModel& m, EngineConfig config,
                                    std::optional<DType> kv_dtype, std::optional<BatchFlags> batch,
                                    BatchChoice* chosen) {
  const EnvSwitches& env = env_switches();
  if (env.overlap != Overlap::Auto) config.overlap = env.overlap;  // TANDEM_OVERLAP, when set
  ExecutorConfig executor_config{.kv_dtype = kv_dtype,
                                 .graphs = env.graphs,
                                 .verify_graphs = env.verify_graphs,
                                 .vision_timing = env.vision_timing};
  const bool gpu = m.backend->device() != Device::CPU;
  std::unique_ptr<Executor> executor =
      m.tp_ranks ? make_tensor_parallel_executor(std::move(m.backend), std::move(m.model),
                                                 std::move(m.tp_ranks), executor_config,
                                                 std::move(m.draft))
                 : make_executor(std::move(m.backend), std::move(m.model), executor_config,
                                 std::move(m.draft));
  if (batch) {
    // The room is asked for the largest step auto could choose (its activations and
    // logits come out of the same memory).
    SchedulerConfig& s = config.scheduler;
    s.max_rows = batch->rows.value_or(kMaxAutoRows);
    s.max_batched_tokens = batch->tokens.value_or(kCudaAutoTokens);
    const KvRoom room = executor->kv_room(kv_sizing(*executor->info().model, config));
    const BatchChoice c = choose_batch(
        *batch, {.gpu = gpu,
                 .kv_bytes_available = config.kv_budget_bytes.value_or(room.bytes_available),
                 .kv_bytes_per_token = room.bytes_per_token,
                 .max_model_len = config.max_model_len.value_or(
                     executor->info().model->max_position_embeddings)});
    s.max_rows = c.rows;
    s.max_batched_tokens = c.tokens;
    if (chosen) *chosen = c;
  }
  return std::make_unique<Engine>(std::move(executor), m.tokenizer, std::move(config));
}

std::string default_model_dir() {
  // Beside the working directory first (a checkout), then where the build came from.
  if (std::filesystem::exists("models/tiny-kjv/config.json")) return "models/tiny-kjv";
  return TANDEM_DEFAULT_MODEL;
}

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == ',')) i++;
    if (i == text.size()) break;
    int32_t v = 0;
    auto [end, ec] = std::from_chars(text.data() + i, text.data() + text.size(), v);
    if (ec != std::errc() || (end != text.data() + text.size() && *end != ',' && *end != ' '))
      fail("--ids: '{}' is not a comma-separated list of token ids", text);
    ids.push_back(v);
    i = size_t(end - text.data());
  }
  if (ids.empty()) fail("--ids: no token ids given");
  return ids;
}

}  // namespace tandem::cli
