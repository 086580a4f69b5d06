// How a served model pools its embeddings: `--pooling`, else what the folder's
// sentence-transformers files say, else `last` (the hidden state a decoder's LM head reads).
//
// sentence-transformers folders list their modules in modules.json; the Pooling module's
// folder (usually 1_Pooling/) holds config.json with one pooling_mode_* set:
// pooling_mode_lasttoken → last, pooling_mode_mean_tokens → mean, pooling_mode_cls_token →
// cls. A folder asking for what tandem does not compute is refused at start, naming the
// file, rather than served with other vectors than its own library computes: another mode
// (max, weighted mean, mean/√len) or several at once, include_prompt false, or a module
// after pooling other than Normalize (a Dense projection changes the vectors).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "engine/pooling.h"

namespace tandem::server {

struct PoolingChoice {
  Pooling pooling = Pooling::Last;
  std::string source;  // "--pooling", the config file it came from, or "default"
};

// The folder's sentence-transformers pooling; nullopt when it has none. Throws tandem::Error
// naming the file for a malformed one or one tandem cannot compute (see above).
std::optional<Pooling> sentence_transformers_pooling(const std::filesystem::path& dir);

// `flag`: --pooling's value, "auto" (the folder's, else last) or a pooling name. Throws
// tandem::Error for another name, and as sentence_transformers_pooling does (also when the
// flag is given: a folder that would compute other vectors is refused either way).
PoolingChoice choose_pooling(const std::filesystem::path& dir, const std::string& flag);

}  // namespace tandem::server
