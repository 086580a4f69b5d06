#include "model/lora/lora_slots.h"

#include <map>
#include <utility>
#include <vector>

#include "core/error.h"

namespace tandem {

namespace {

struct ShardRef {
  size_t target = 0;
  size_t shard = 0;
};

// Every adapter module → the shard it lands in; refuses modules the model lacks and
// shapes that do not fit.
std::map<std::string, ShardRef> match_modules(const LoraTargets& targets, const PeftAdapter& ad) {
  std::map<std::string, ShardRef> by_module;
  for (size_t t = 0; t < targets.targets.size(); t++)
    for (size_t s = 0; s < targets.targets[t].shards.size(); s++)
      by_module[targets.targets[t].shards[s].module] = {t, s};
  const std::string where = ad.dir.string();
  std::map<std::string, ShardRef> matched;
  for (auto& [name, m] : ad.modules) {
    auto it = by_module.find(name);
    if (it == by_module.end())
      fail("{}: module '{}' is not a projection of this model that adapters may target "
           "(attention q/k/v/o and MLP gate/up/down)", where, name);
    const LoraTarget& t = targets.targets[it->second.target];
    const LoraShard& shard = t.shards[it->second.shard];
    if (m.a.dim(1) != t.full_in_features || m.b.dim(0) != shard.full_rows)
      fail("{}: module '{}': lora_A {} and lora_B {} do not fit the projection [{}, {}]", where,
           name, m.a.shape.str(), m.b.shape.str(), shard.full_rows, t.full_in_features);
    if (m.a.dim(0) > targets.capacity.max_rank)
      fail("{}: module '{}' has rank {}, above the server's max LoRA rank {}", where, name,
           m.a.dim(0), targets.capacity.max_rank);
    matched[name] = it->second;
  }
  return matched;
}

// A host f32 tensor as a host tensor of `dtype`.
Tensor in_dtype(const Tensor& f32, DType dtype) {
  if (dtype == DType::F32) return f32;
  Tensor out = Tensor::empty_host(dtype, f32.shape);
  convert_from_f32(f32.ptr<float>(), out.data, dtype, size_t(f32.numel()));
  return out;
}

// Slot `slot` of bank tensor `bank` [S, X, Y] as a [1, X·Y] view.
Tensor slot_view(const Tensor& bank, int slot) {
  int64_t per = bank.dim(1) * bank.dim(2);
  return bank.reshape({bank.dim(0), per}).slice_rows(slot, 1);
}

void write_bank_slot(Backend& be, const Tensor& bank, int slot, const Tensor& host) {
  Tensor device = be.upload(host.reshape({1, host.numel()}), bank.dtype);
  Tensor dst = slot_view(bank, slot);
  be.copy(dst, device);
}

}  // namespace

LoraSlotImage lora_slot_image(const LoraTargets& targets, const PeftAdapter& ad) {
  std::map<std::string, ShardRef> matched = match_modules(targets, ad);
  const int64_t max_rank = targets.capacity.max_rank;
  // Zeros where the adapter does not reach.
  LoraSlotImage image;
  for (const LoraTarget& t : targets.targets) {
    image.a.push_back(Tensor::empty_host(DType::F32, {t.bank.rank(), t.in_features}));
    image.b.push_back(Tensor::empty_host(DType::F32, {t.out_features, t.bank.rank()}));
  }
  for (auto& [name, ref] : matched) {
    const PeftModule& m = ad.modules.at(name);
    const LoraTarget& t = targets.targets[ref.target];
    const LoraShard& shard = t.shards[ref.shard];
    const int64_t r = m.a.dim(0), K = t.in_features, R = t.bank.rank();
    const int64_t full_K = t.full_in_features, k0 = t.a_first_col;  // a rank's columns of A
    const int64_t col0 = int64_t(ref.shard) * max_rank;
    float* pa = image.a[ref.target].ptr<float>();
    float* pb = image.b[ref.target].ptr<float>();
    for (int64_t j = 0; j < r; j++)
      for (int64_t k = 0; k < K; k++)
        pa[(col0 + j) * K + k] = m.a.ptr<float>()[j * full_K + k0 + k];
    // The module's rows this shard holds (all of them unless tensor parallelism split them).
    std::vector<std::pair<int64_t, int64_t>> ranges = shard.source_rows;
    if (ranges.empty()) ranges.push_back({0, shard.num_rows});
    int64_t n = 0;
    for (auto [first, count] : ranges)
      for (int64_t i = 0; i < count; i++, n++)
        for (int64_t j = 0; j < r; j++)
          pb[(shard.row_offset + n) * R + col0 + j] =
              m.scaling * m.b.ptr<float>()[(first + i) * r + j];
  }
  // In the banks' dtype already, so installing is a plain copy.
  for (size_t i = 0; i < targets.targets.size(); i++) {
    image.a[i] = in_dtype(image.a[i], targets.targets[i].bank.a.dtype);
    image.b[i] = in_dtype(image.b[i], targets.targets[i].bank.b.dtype);
  }
  return image;
}

void install_lora_slot(Backend& be, const LoraTargets& targets, int slot,
                       const LoraSlotImage& image) {
  TANDEM_CHECK(slot > 0 && slot < targets.capacity.num_slots(), "LoRA slot {} outside [1, {})",
               slot, targets.capacity.num_slots());
  TANDEM_CHECK(image.a.size() == targets.targets.size() && image.b.size() == targets.targets.size(),
               "LoRA slot image of {} targets for a model of {}", image.a.size(),
               targets.targets.size());
  for (size_t i = 0; i < targets.targets.size(); i++) {
    write_bank_slot(be, targets.targets[i].bank.a, slot, image.a[i]);
    write_bank_slot(be, targets.targets[i].bank.b, slot, image.b[i]);
  }
}

void write_lora_slot(Backend& be, const LoraTargets& targets, int slot, const PeftAdapter& ad) {
  TANDEM_CHECK(slot > 0 && slot < targets.capacity.num_slots(), "LoRA slot {} outside [1, {})",
               slot, targets.capacity.num_slots());
  install_lora_slot(be, targets, slot, lora_slot_image(targets, ad));
}

void clear_lora_slot(Backend& be, const LoraTargets& targets, int slot) {
  TANDEM_CHECK(slot > 0 && slot < targets.capacity.num_slots(), "LoRA slot {} outside [1, {})",
               slot, targets.capacity.num_slots());
  for (const LoraTarget& t : targets.targets) {
    write_bank_slot(be, t.bank.a, slot, Tensor::empty_host(DType::F32, {t.bank.rank(), t.in_features}));
    write_bank_slot(be, t.bank.b, slot, Tensor::empty_host(DType::F32, {t.out_features, t.bank.rank()}));
  }
}

}  // namespace tandem
