// `tandem quantize --gguf TYPE --model DIR --out FILE.gguf`: a 16/32-bit Hugging Face folder
// written as the GGUF file llama.cpp would make of it (convert_hf_to_gguf.py, then
// llama-quantize TYPE): llama.cpp's names, metadata and per-tensor type mix, the folder's
// tokenizer in the metadata (cli/gguf_export.h). Streamed: the folder is read through its
// mapping and the file written chunk by chunk.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>

#include "cli/commands.h"
#include "cli/gguf_export.h"
#include "core/error.h"
#include "loader/checkpoint.h"
#include "loader/quant_scheme.h"

namespace tandem::cli {

int run_quantize_gguf(const QuantizeOptions& o) {
  try {
    const auto type = gguf_file_type_from_name(*o.gguf);
    if (!type) fail("--gguf: '{}' is not one of {}", *o.gguf, kGgufFileTypes);
    const std::filesystem::path src(o.model), out(o.out);
    std::ifstream in(src / "config.json");
    if (!in) fail("{}: no config.json", src.string());
    const nlohmann::json config = nlohmann::json::parse(in, nullptr, false);
    if (config.is_discarded()) fail("{}: invalid JSON", (src / "config.json").string());
    if (parse_quantization_config(config, (src / "config.json").string()).fp8())
      fail(
          "{}: the checkpoint is quantized (FP8); GGUF files are written from 16- or 32-bit "
          "weights",
          src.string());
    if (std::filesystem::is_directory(out))
      fail("--out {}: a folder; --gguf writes one file", out.string());
    const auto start = std::chrono::steady_clock::now();
    const Checkpoint ck = Checkpoint::open(src);
    const uint64_t bytes =
        write_gguf_model(config, out.stem().string(), src, checkpoint_sources(ck), *type, out);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fmt::print(stderr, "wrote {} ({}: {:.3f} GB of weights in {:.1f} s)\n", out.string(),
               gguf_file_type_name(*type), double(bytes) / 1e9, secs);
    return 0;
  } catch (const Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}

}  // namespace tandem::cli
