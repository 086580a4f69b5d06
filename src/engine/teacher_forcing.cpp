#include "engine/teacher_forcing.h"

#include <cstring>
#include <functional>
#include <memory>

#include "core/error.h"
#include "engine/model_runner.h"
#include "engine/step_plan.h"
#include "kv/kv_block_manager.h"
#include "model/config.h"

namespace tandem {

namespace {

// The loop both overloads share: `forward` runs one plan and returns its host f32 logits;
// `num_groups` is the model's KV groups.
Tensor teacher_force(const ModelConfig& config, int num_groups, std::span<const int32_t> ids,
                     int chunk, int block_size, int lora_slot, std::span<const MediaSpan> media,
                     const std::function<Tensor(const StepPlan&)>& forward) {
  int n = int(ids.size());
  int vocab = config.vocab_size;
  for (int32_t id : ids)
    if (id < 0 || id >= vocab) fail("token id {} is outside the vocabulary (0..{})", id, vocab - 1);
  BlockPool pool(blocks_for(n, block_size) + 1);
  // Every KV group gets the same ids (its storage has as many blocks); nothing is released.
  BlockTables tables(size_t(num_groups), pool.allocate(blocks_for(n, block_size)));
  Tensor out = Tensor::empty_host(DType::F32, {int64_t(n), int64_t(vocab)});
  if (chunk <= 0) chunk = n;
  for (int start = 0, count = 0; start < n; start += count) {
    count = std::min(chunk, n - start);
    for (const MediaSpan& m : media)  // an image goes whole into one step
      if (m.start < start + count && start + count < m.start + m.length)
        count = m.start > start ? m.start - start : m.start + m.length - start;
    PlanRow row{.tokens = ids,
                .start = start,
                .count = count,
                .block_tables = tables,
                .num_logits = count,
                .lora_slot = lora_slot,
                .media = media};
    Tensor logits = forward(build_step_plan(std::span<const PlanRow>(&row, 1), block_size));
    std::memcpy(out.ptr<float>() + int64_t(start) * vocab, logits.data, logits.nbytes());
  }
  return out;
}

int blocks_of(int n, int block_size) {
  return blocks_for(n, block_size) + 1;
}

}  // namespace

Tensor teacher_forced_logits(Model& model, Backend& backend, std::span<const int32_t> ids,
                             int chunk, int block_size, int lora_slot,
                             std::span<const MediaSpan> media) {
  ModelRunner runner(model, backend, blocks_of(int(ids.size()), block_size), block_size);
  return teacher_force(
      model.config(), runner.num_groups(), ids, chunk, block_size, lora_slot, media,
      [&](const StepPlan& plan) { return backend.to_host_f32(runner.forward(plan)); });
}

Tensor teacher_forced_logits(TpRanks& ranks, std::span<const int32_t> ids, int chunk,
                             int block_size, int lora_slot, std::span<const MediaSpan> media) {
  std::vector<std::unique_ptr<ModelRunner>> runners(size_t(ranks.size()));
  ranks.run([&](int r) {  // each rank's cache on its own thread (a GPU rank: its device)
    runners[size_t(r)] = std::make_unique<ModelRunner>(
        ranks.model(r), ranks.backend(r), blocks_of(int(ids.size()), block_size), block_size);
  });
  return teacher_force(ranks.model(0).config(), runners[0]->num_groups(), ids, chunk, block_size,
                       lora_slot, media, [&](const StepPlan& plan) {
                         Tensor logits;
                         ranks.run([&](int r) {
                           Tensor out = runners[size_t(r)]->forward(plan);
                           if (r == 0) logits = out;
                         });
                         return ranks.backend(0).to_host_f32(logits);
                       });
}

}  // namespace tandem
