// Engine: loading LoRA adapters while the loop runs. The step loop never reads a folder:
// load_lora reserves a name and a free slot, reads the PEFT folder and builds the slot's
// host image on the caller's thread, and hands only the finished image to the engine
// thread, which copies it into the slot at the top of its next iteration (take_inbox),
// between two steps. No issued step reads that slot (it was free: no live sequence holds
// it), and the copy is in stream order after them, so in-flight steps are undisturbed and
// CUDA graphs, which read the banks by address, see the new weights on their next replay.
#include "engine/engine.h"

#include "model/lora/peft_adapter.h"

namespace tandem {

LoraAdapter Engine::load_lora(const std::string& name, const std::filesystem::path& dir) {
  if (name == info_.name)
    throw LoraLoadError(LoraRefusal::BadName,
                        fmt::format("LoRA adapter '{}': that is the base model's name", name));
  LoraAdapter adapter = loras_.reserve(name, dir);
  try {
    install_lora(adapter.slot, read_lora_image(dir));
  } catch (...) {
    loras_.cancel(name);
    throw;
  }
  loras_.activate(name);
  return adapter;
}

std::shared_ptr<const LoraSlotImage> Engine::read_lora_image(
    const std::filesystem::path& dir) const {
  try {
    return std::make_shared<const LoraSlotImage>(executor_->lora_image(load_peft_adapter(dir)));
  } catch (const LoraLoadError&) {
    throw;
  } catch (const std::exception& e) {
    throw LoraLoadError(LoraRefusal::BadAdapter, e.what());
  }
}

void Engine::install_lora(int slot, std::shared_ptr<const LoraSlotImage> image) {
  std::future<void> done;
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    if (!thread_.joinable()) return executor_->install_lora(slot, *image);  // no loop: now
    if (stopping_)
      throw LoraLoadError(LoraRefusal::Stopping,
                          "the engine is stopping; the adapter was not loaded");
    lora_installs_.push_back({.slot = slot, .image = std::move(image), .done = {}});
    done = lora_installs_.back().done.get_future();
  }
  inbox_cv_.notify_one();
  done.get();  // rethrows what the engine thread met
}

// The engine thread, between steps.
void Engine::run_lora_installs() {
  std::vector<LoraInstall> work;
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    work.swap(lora_installs_);
  }
  for (LoraInstall& w : work) {
    try {
      executor_->install_lora(w.slot, *w.image);
      w.done.set_value();
    } catch (...) {
      w.done.set_exception(std::current_exception());
    }
  }
}

// The loop has ended: installs still queued will never run (stopping_ is set, so no more
// can arrive).
void Engine::refuse_lora_installs() {
  std::vector<LoraInstall> work;
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    work.swap(lora_installs_);
  }
  for (LoraInstall& w : work)
    w.done.set_exception(std::make_exception_ptr(
        LoraLoadError(LoraRefusal::Stopping, "the engine stopped; the adapter was not loaded")));
}

// A sequence that leaves the engine, however it ends, gives its adapter back.
void Engine::release_lora(Sequence& seq) {
  if (seq.lora) loras_.release(*seq.lora);
  seq.lora.reset();
}

}  // namespace tandem
