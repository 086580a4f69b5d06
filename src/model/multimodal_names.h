// Where a multimodal checkpoint keeps its parts. Two naming schemes are published:
//   the Hub's          language_model.model.*  language_model.lm_head.*
//                      vision_tower.vision_model.*  multi_modal_projector.*
//   transformers 5's   model.language_model.*  lm_head.*
//                      model.vision_tower.*  model.multi_modal_projector.* / model.embed_vision.*
// (and mixtures: transformers 5.17 saves Gemma 3 as language_model.model.* beside
// vision_tower.*). Each part is found by probing for one of its tensors under the known
// prefixes, so a text model reads its usual names from any of them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "loader/checkpoint.h"
#include "model/weight_map.h"

namespace tandem {

// The first of `prefixes` under which the checkpoint holds `probe`; nullopt when none.
std::optional<std::string> find_prefix(const Checkpoint& ck,
                                       const std::vector<std::string>& prefixes,
                                       const std::string& probe);
// The same, failing with the names it looked for.
std::string require_prefix(const Checkpoint& ck, const std::vector<std::string>& prefixes,
                           const std::string& probe, const std::string& part);

// The prefix of the text model's "model.*" tensors: "model." in a text-only checkpoint,
// "model.language_model." or "language_model.model." in a multimodal one.
std::string text_model_prefix(const Checkpoint& ck);

// A text model's map read from a multimodal checkpoint: sources under "model." move under
// `prefix`, and "lm_head." under "language_model.lm_head." where the checkpoint has that.
WeightMap rebase_text_map(WeightMap map, const std::string& prefix, const Checkpoint& ck);

}  // namespace tandem
