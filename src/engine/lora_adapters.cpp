#include "engine/lora_adapters.h"

namespace tandem {

LoraAdapter LoraAdapters::reserve(const std::string& name, const std::filesystem::path& dir) {
  std::lock_guard<std::mutex> lock(mu_);
  if (max_loras_ == 0)
    throw LoraLoadError(LoraRefusal::NoCapacity,
                        fmt::format("LoRA adapter '{}': the model was loaded without LoRA slots "
                                    "(--max-loras)",
                                    name));
  if (name.empty())
    throw LoraLoadError(LoraRefusal::BadName,
                        fmt::format("LoRA adapter for {}: the name is empty", dir.string()));
  if (by_name_.count(name))
    throw LoraLoadError(LoraRefusal::NameTaken,
                        fmt::format("The lora adapter '{}' has already been loaded.", name));
  std::vector<bool> used(size_t(max_loras_) + 1, false);
  for (auto& [n, e] : by_name_) used[size_t(e.adapter.slot)] = true;
  int slot = 1;
  while (slot <= max_loras_ && used[size_t(slot)]) slot++;
  if (slot > max_loras_)
    throw LoraLoadError(LoraRefusal::NoFreeSlot,
                        fmt::format("LoRA adapter '{}': all {} slots hold adapters (--max-loras); "
                                    "unload one first",
                                    name, max_loras_));
  LoraAdapter a{.name = name, .dir = dir, .slot = slot, .id = next_id_++};
  by_name_[name] = Entry{.adapter = a};
  return a;
}

void LoraAdapters::activate(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_name_.find(name);
  TANDEM_CHECK(it != by_name_.end() && !it->second.active, "LoRA adapter '{}' is not reserved",
               name);
  it->second.active = true;
}

void LoraAdapters::cancel(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_name_.find(name);
  if (it != by_name_.end() && !it->second.active) by_name_.erase(it);
}

LoraRemoval LoraAdapters::remove(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_name_.find(name);
  if (it == by_name_.end() || !it->second.active) return LoraRemoval::NotFound;
  if (it->second.adapter.num_users > 0) return LoraRemoval::InUse;
  by_name_.erase(it);
  return LoraRemoval::Removed;
}

std::optional<LoraUse> LoraAdapters::acquire(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_name_.find(name);
  if (it == by_name_.end() || !it->second.active) return std::nullopt;
  it->second.adapter.num_users++;
  return LoraUse{it->second.adapter.slot, it->second.adapter.id};
}

void LoraAdapters::release(const LoraUse& use) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [n, e] : by_name_)
    if (e.adapter.id == use.id) e.adapter.num_users--;
}

std::vector<LoraAdapter> LoraAdapters::list() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<LoraAdapter> out;
  for (auto& [n, e] : by_name_)
    if (e.active) out.push_back(e.adapter);
  return out;
}

}  // namespace tandem
