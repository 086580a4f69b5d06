// Post-processors (HF `processors`): what encode(add_special_tokens=true) wraps around the
// ids of one sequence. TemplateProcessing ("single" template and its special tokens),
// BertProcessing ([CLS] A [SEP]), RobertaProcessing (<s> A </s>), ByteLevel (offsets only,
// so nothing for ids) and Sequence. Pairs of sequences are not encoded by tandem.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tokenizer/json_fields.h"

namespace tandem::tok {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // Rewrites the ids of a single sequence.
  virtual void process(std::vector<int32_t>& ids) const = 0;
};

// Null JSON gives nullptr (no special tokens are added).
std::unique_ptr<PostProcessor> make_post_processor(const json& j, const LoadContext& ctx);

}  // namespace tandem::tok
