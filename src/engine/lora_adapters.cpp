#include "engine/lora_adapters.h"

#include "core/error.h"

namespace tandem {

LoraAdapter LoraAdapters::add(Executor& executor, const std::string& name,
                              const std::filesystem::path& dir) {
  std::lock_guard<std::mutex> lock(mu_);
  if (max_loras_ == 0) fail("LoRA adapter '{}': the model was loaded without LoRA slots (--max-loras)", name);
  if (name.empty()) fail("LoRA adapter for {}: the name is empty", dir.string());
  if (by_name_.count(name)) fail("LoRA adapter '{}' is loaded already", name);
  std::vector<bool> used(size_t(max_loras_) + 1, false);
  for (auto& [n, a] : by_name_) used[size_t(a.slot)] = true;
  int slot = 1;
  while (slot <= max_loras_ && used[size_t(slot)]) slot++;
  if (slot > max_loras_)
    fail("LoRA adapter '{}': all {} slots are in use (--max-loras)", name, max_loras_);
  executor.write_lora(slot, dir);
  LoraAdapter a{.name = name, .dir = dir, .slot = slot, .id = next_id_++};
  by_name_[name] = a;
  return a;
}

LoraRemoval LoraAdapters::remove(Executor& executor, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return LoraRemoval::NotFound;
  if (it->second.num_users > 0) return LoraRemoval::InUse;
  executor.write_lora(it->second.slot, std::nullopt);
  by_name_.erase(it);
  return LoraRemoval::Removed;
}

std::optional<LoraUse> LoraAdapters::acquire(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  it->second.num_users++;
  return LoraUse{it->second.slot, it->second.id};
}

void LoraAdapters::release(const LoraUse& use) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [n, a] : by_name_)
    if (a.id == use.id) a.num_users--;
}

std::vector<LoraAdapter> LoraAdapters::list() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<LoraAdapter> out;
  for (auto& [n, a] : by_name_) out.push_back(a);
  return out;
}

}  // namespace tandem
