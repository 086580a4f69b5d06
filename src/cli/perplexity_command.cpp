// `tandem perplexity`: mean negative log-likelihood and perplexity over a text file.
#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "cli/model_files.h"
#include "core/error.h"
#include "engine/perplexity.h"
#include "model/config.h"
#include "tokenizer/tokenizer.h"

namespace tandem::cli {

int run_perplexity(const PerplexityOptions& o) {
  try {
    LoadedModel m = load_model_folder(o.model, o.device,
                                      LoadOptions{.online = online_quantization(o.quantization),
                                                  .tp = {.size = o.tensor_parallel_size}},
                                      o.tokenizer);
    if (!m.tokenizer) fail("{}: perplexity needs tokenizer.json in the model folder", o.model);
    std::ifstream in(o.file, std::ios::binary);
    if (!in) fail("{}: cannot open", o.file);
    std::stringstream text;
    text << in.rdbuf();
    std::vector<int32_t> ids = m.tokenizer->encode(text.str(), /*add_special_tokens=*/false);
    int window = o.context > 0 ? o.context : m.model->config().max_position_embeddings;
    PerplexityResult r = m.tp_ranks ? perplexity(*m.tp_ranks, ids, window)
                                    : perplexity(*m.model, *m.backend, ids, window);
    fmt::print("tokens {}  scored {}  window {}\nmean_nll {:.5f}  perplexity {:.4f}\n",
               ids.size(), r.num_scored, window, r.mean_nll, r.perplexity);
    return 0;
  } catch (const Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}

}  // namespace tandem::cli
