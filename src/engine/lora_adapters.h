// The LoRA adapters an engine serves: name → slot in the model's banks
// (model/lora/lora_targets.h), with a stable id (never reused within the process: what the
// prefix cache hashes into block hashes, so two adapters never share KV) and how many live
// sequences use each. An adapter with users is never erased under them: remove() answers
// InUse and the caller reports it (the server: 409).
// Thread-safe: HTTP threads look names up, the engine thread acquires and releases.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/executor.h"

namespace tandem {

struct LoraAdapter {
  std::string name;
  std::filesystem::path dir;
  int slot = 0;      // 1..max_loras
  uint64_t id = 0;   // stable, unique per load
  int num_users = 0; // live sequences
};

// What a sequence holds while it runs with an adapter.
struct LoraUse {
  int slot = 0;
  uint64_t id = 0;
};

enum class LoraRemoval : uint8_t { Removed, NotFound, InUse };

class LoraAdapters {
 public:
  explicit LoraAdapters(int max_loras) : max_loras_(max_loras) {}

  // Writes the adapter in `dir` into a free slot through `executor` (between steps) and
  // names it. Throws tandem::Error: no LoRA capacity, name taken, every slot used, or the
  // adapter does not fit the model.
  LoraAdapter add(Executor& executor, const std::string& name, const std::filesystem::path& dir);
  // Zeros the adapter's slot and forgets it, unless a live sequence uses it.
  LoraRemoval remove(Executor& executor, const std::string& name);
  // The adapter's slot and id, its user count raised; nullopt when the name is unknown.
  std::optional<LoraUse> acquire(const std::string& name);
  void release(const LoraUse& use);
  std::vector<LoraAdapter> list() const;
  int max_loras() const { return max_loras_; }

 private:
  int max_loras_;
  mutable std::mutex mu_;
  std::map<std::string, LoraAdapter> by_name_;
  uint64_t next_id_ = 1;
};

}  // namespace tandem
