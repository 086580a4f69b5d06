// The architecture registry: config.json's model_type → a builder. Adding an
// architecture is its own file in arch/ plus one line in registry.cpp.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "loader/checkpoint.h"
#include "model/model.h"
#include "model/weight_map.h"

namespace tandem {

using ArchBuilder = std::unique_ptr<Model> (*)(ModelConfig config, const Checkpoint& checkpoint,
                                               Backend& backend);

// nullptr when model_type is unknown.
ArchBuilder find_architecture(const std::string& model_type);
std::vector<std::string> architecture_names();

// Tensor parallelism (config.tp) splits DecoderModel's architectures only, and the
// dimensions it cuts must divide by N (model/tp_slices.h): otherwise an error naming
// `source` (the config the model came from). Nothing to check at size 1.
void check_tensor_parallel(const ModelConfig& config, const std::string& type,
                           const std::string& source);

}  // namespace tandem
