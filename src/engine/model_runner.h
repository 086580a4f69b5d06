// ModelRunner: executes a StepPlan through the model on the backend. It owns the KV
// storage (one PagedKv per layer that stores KV) and the step's device-side arrays.
#pragma once

#include <memory>
#include <vector>

#include "backend/backend.h"
#include "engine/step_plan.h"
#include "model/model.h"

namespace tandem {

class ModelRunner {
 public:
  ModelRunner(Model& model, Backend& backend, int num_blocks, int block_size);

  // Logits of the plan's sample_index tokens, as a host f32 tensor [S, vocab].
  Tensor forward(const StepPlan& plan);

  int num_blocks() const { return num_blocks_; }
  int block_size() const { return block_size_; }
  // Bytes of KV storage one block takes across all layers.
  static int64_t bytes_per_block(const Model& model, int block_size, DType dtype);

 private:
  StepTensors upload(const StepPlan& plan);

  Model& model_;
  Backend& backend_;
  int num_blocks_;
  int block_size_;
  std::vector<PagedKv> kv_;  // [num_layers]
};

}  // namespace tandem
