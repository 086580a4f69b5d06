#include "engine/teacher_forcing.h"

#include <cstring>

#include "core/error.h"
#include "engine/model_runner.h"
#include "engine/step_plan.h"
#include "kv/kv_block_manager.h"

namespace tandem {

Tensor teacher_forced_logits(Model& model, Backend& backend, std::span<const int32_t> ids,
                             int chunk, int block_size, int lora_slot,
                             std::span<const MediaSpan> media) {
  int n = int(ids.size());
  int vocab = model.config().vocab_size;
  for (int32_t id : ids)
    if (id < 0 || id >= vocab) fail("token id {} is outside the vocabulary (0..{})", id, vocab - 1);
  BlockPool pool(blocks_for(n, block_size) + 1);
  ModelRunner runner(model, backend, pool.num_blocks(), block_size);
  // Every KV group gets the same ids (its storage has as many blocks); nothing is released.
  BlockTables tables(size_t(runner.num_groups()), pool.allocate(blocks_for(n, block_size)));
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
    StepPlan plan = build_step_plan(std::span<const PlanRow>(&row, 1), block_size);
    Tensor logits = backend.to_host_f32(runner.forward(plan));
    std::memcpy(out.ptr<float>() + int64_t(start) * vocab, logits.data, logits.nbytes());
  }
  return out;
}

}  // namespace tandem
