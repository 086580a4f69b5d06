#include "model/arch/gemma_per_layer.h"

#include <cmath>

namespace tandem::arch {

Tensor per_layer_inputs(Backend& be, const Tensor& x0, const Tensor& tokens,
                        const PerLayerInputs& p) {
  const int64_t T = x0.dim(0), L = p.num_layers, P = p.width;
  Tensor projected = linear(be, x0, p.projection);  // [T, L·P]
  be.scale(projected, float(1.0 / std::sqrt(double(x0.cols()))));
  Tensor per_layer = projected.reshape({T * L, P});
  rms_norm_in_place(be, per_layer, p.norm);
  Tensor embedded = tp_embedding(be, p.embed, tokens, p.vocab, p.tp, float(std::sqrt(double(P))));
  be.add(projected, projected, embedded);
  be.scale(projected, float(1.0 / std::sqrt(2.0)));
  Tensor out = be.alloc(be.act_dtype(), {L, T, P});
  be.swap_leading_dims(out, projected.reshape({T, L, P}));
  return out;
}

Tensor per_layer_branch(Backend& be, const Tensor& x, const Tensor& pli, const PerLayerBranch& b) {
  Tensor gate = linear(be, x, b.gate);  // [T, P]
  Tensor gated = be.alloc(be.act_dtype(), gate.shape);
  be.act_mul(gated, gate, pli, b.act);
  Tensor update = linear(be, gated, b.proj);  // [T, D]
  rms_norm_in_place(be, update, b.norm);
  return update;
}

}  // namespace tandem::arch
