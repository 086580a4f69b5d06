// A Hugging Face model folder's weights: one name -> tensor map over one or more mapped
// safetensors files.
//
// If model.safetensors.index.json exists, its "weight_map" (tensor -> shard file) is the
// truth: each shard is opened once, and every tensor it lists must be in its shard.
// Otherwise every *.safetensors file in the folder is opened (sorted by name) and a tensor
// name may appear in only one of them. Tensors are zero-copy views of the mappings (see
// safetensors.h); a Checkpoint is cheap to copy (the files are shared).
//
// A checkpoint can also stand over a GGUF model (from_gguf): its tensors then answer to the
// Hugging Face names the architectures' weight maps use, each an alias of a GGUF tensor
// (loader/gguf_alias.h) — so the models load either format the same way.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "loader/gguf_alias.h"
#include "loader/quant_scheme.h"
#include "loader/safetensors.h"

namespace tandem {

class Checkpoint {
 public:
  static constexpr const char* kIndexName = "model.safetensors.index.json";

  static Checkpoint open(const std::filesystem::path& dir);
  // The tensors of a GGUF model under the names `aliases` gives them.
  static Checkpoint from_gguf(std::shared_ptr<const GgufModel> model,
                              std::map<std::string, GgufAlias> aliases);

  bool has(const std::string& name) const {
    return where_.count(name) != 0 || aliases_.count(name) != 0;
  }
  // Throws "tensor 'X' not found in DIR" when missing.
  Tensor get(const std::string& name) const;
  // The dtype `name` is stored in, without reading (or rearranging) its bytes.
  DType dtype(const std::string& name) const;
  // The name `name` is stored under: its GGUF tensor's, or `name` itself. For messages.
  std::string stored_name(const std::string& name) const;
  // All tensor names, sorted.
  std::vector<std::string> names() const;
  // The folder (or the GGUF file) the tensors come from, for messages.
  std::filesystem::path dir() const { return dir_; }
  // The safetensors files behind the map, in the order they were opened (none for GGUF).
  const std::vector<std::shared_ptr<SafetensorsFile>>& files() const { return files_; }
  // The GGUF model behind the map (null for safetensors).
  const GgufModel* gguf() const { return gguf_.get(); }
  // Bytes of every file behind the map.
  uint64_t total_bytes() const;
  // The safetensors file holding `name` (throws like get(), and for a GGUF tensor).
  const SafetensorsFile& file_of(const std::string& name) const;
  // Starts reading the tensor's bytes into the page cache in the background.
  void prefetch(const std::string& name) const;
  // Drops the resident pages of a GGUF file under a tensor get() returned, once the backend
  // holds its own copy (MappedFile::release): the file's pages then do not add to the memory
  // of a loaded model. Nothing for other tensors.
  void release(const Tensor& host) const;
  // How the linear weights are read: as stored, with the checkpoint's FP8 scales, or
  // quantized while loading (set by load_model from config.json and --quantization).
  const QuantScheme& quant() const { return quant_; }
  void set_quant(QuantScheme quant) { quant_ = std::move(quant); }

 private:
  void open_indexed(const std::filesystem::path& index);
  void open_all_files();

  std::filesystem::path dir_;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> where_;  // name -> the file that holds it
  std::shared_ptr<const GgufModel> gguf_;
  std::map<std::string, GgufAlias> aliases_;  // name -> its GGUF tensor (from_gguf)
  QuantScheme quant_;
};

}  // namespace tandem
