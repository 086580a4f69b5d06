// The LoRA adapters an engine serves: name → slot in the model's banks
// (model/lora/lora_targets.h), with a stable id (never reused within the process: what the
// prefix cache hashes into block hashes, so two adapters never share KV) and how many live
// sequences use each. Bookkeeping only: the engine writes the slots (Engine::load_lora).
//
// A load is two-phase, so the slow part (reading and checking the folder) runs off the
// engine thread: reserve() claims the name and a free slot, activate() makes the adapter
// selectable once its weights are installed, cancel() gives both back when that fails. A
// reserved adapter is invisible to requests (acquire, list). An adapter with users is never
// erased under them: remove() answers InUse and the caller reports it (the server: 409).
// Unloading touches no device memory: the slot is free again at once, and the next adapter
// installed there overwrites all of it (lora_slots.h).
// Thread-safe: HTTP threads load, unload and look names up; the engine thread releases.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace tandem {

struct LoraAdapter {
  std::string name;
  std::filesystem::path dir;
  int slot = 0;       // 1..max_loras
  uint64_t id = 0;    // stable, unique per load
  int num_users = 0;  // live sequences
};

// What a sequence holds while it runs with an adapter.
struct LoraUse {
  int slot = 0;
  uint64_t id = 0;
};

enum class LoraRemoval : uint8_t { Removed, NotFound, InUse };

// Why a load was refused (the server answers 400 for the request's faults, 409 for
// NoFreeSlot: the request is fine, the server has no room until an adapter is unloaded).
enum class LoraRefusal : uint8_t {
  NoCapacity,  // the model was loaded without LoRA slots
  BadName,     // empty, or the base model's name
  NameTaken,   // loaded already, or being loaded
  NoFreeSlot,  // every slot holds an adapter
  BadAdapter,  // the folder cannot be read or does not fit the model
  Stopping,    // the engine stopped before the adapter was installed
};

class LoraLoadError : public Error {
 public:
  LoraLoadError(LoraRefusal why, std::string message) : Error(std::move(message)), why_(why) {}
  LoraRefusal why() const { return why_; }

 private:
  LoraRefusal why_;
};

class LoraAdapters {
 public:
  explicit LoraAdapters(int max_loras) : max_loras_(max_loras) {}

  // Claims `name` and the lowest free slot for an adapter about to be installed. Throws
  // LoraLoadError: NoCapacity, BadName (empty), NameTaken, NoFreeSlot.
  LoraAdapter reserve(const std::string& name, const std::filesystem::path& dir);
  // The reserved adapter's weights are in its slot: requests may name it now.
  void activate(const std::string& name);
  // The reserved adapter could not be installed: its name and slot are free again.
  void cancel(const std::string& name);
  // Forgets an active adapter, unless a live sequence uses it.
  LoraRemoval remove(const std::string& name);
  // The active adapter's slot and id, its user count raised; nullopt when the name is
  // unknown (or only reserved).
  std::optional<LoraUse> acquire(const std::string& name);
  void release(const LoraUse& use);
  // The active adapters, by name.
  std::vector<LoraAdapter> list() const;
  int max_loras() const { return max_loras_; }

 private:
  struct Entry {
    LoraAdapter adapter;
    bool active = false;
  };

  int max_loras_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> by_name_;
  uint64_t next_id_ = 1;
};

}  // namespace tandem
