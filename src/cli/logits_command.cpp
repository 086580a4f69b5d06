// `tandem logits`: teacher-forced logits of a token-id sequence, as a .npy file.
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/model_files.h"
#include "cli/npy.h"
#include "cli/pixel_values.h"
#include "core/error.h"
#include "engine/teacher_forcing.h"
#include "model/lora/lora_slots.h"

namespace tandem::cli {

int run_logits(const LogitsOptions& o) {
  try {
    std::vector<int32_t> ids = parse_ids(o.ids);
    LoraCapacity lora = o.lora ? lora_capacity_for({*o.lora}) : LoraCapacity{};
    LoadedModel m = load_model_folder(o.model, o.device,
                                      LoadOptions{.online = online_quantization(o.quantization),
                                                  .lora = lora,
                                                  .tp = {.size = o.tensor_parallel_size}});
    const Model& model0 = m.tp_ranks ? m.tp_ranks->model(0) : *m.model;
    const std::vector<MediaSpan> media =
        o.pixel_values ? media_from_pixel_values(*o.pixel_values, ids, model0.vision_spec())
                       : std::vector<MediaSpan>{};
    if (m.tp_ranks) {  // every rank runs every chunk; rank 0 holds the gathered logits
      if (o.lora)  // each rank its slices of the adapter
        for (int r = 0; r < m.tp_ranks->size(); r++)
          write_lora_slot(m.tp_ranks->backend(r), m.tp_ranks->model(r).lora_targets(), 1,
                          load_peft_adapter(*o.lora));
      Tensor logits = teacher_forced_logits(*m.tp_ranks, ids, 0, 16, o.lora ? 1 : 0, media);
      write_npy(o.out, logits);
      fmt::print(stderr, "wrote {} [{} x {}] f32 ({} ranks)\n", o.out, logits.dim(0), logits.dim(1),
                 m.tp_ranks->size());
      return 0;
    }
    if (o.lora) write_lora_slot(*m.backend, m.model->lora_targets(), 1, load_peft_adapter(*o.lora));
    Tensor logits = teacher_forced_logits(*m.model, *m.backend, ids, 0, 16, o.lora ? 1 : 0, media);
    write_npy(o.out, logits);
    fmt::print(stderr, "wrote {} [{} x {}] f32\n", o.out, logits.dim(0), logits.dim(1));
    return 0;
  } catch (const Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}

}  // namespace tandem::cli
