#include "loader/checkpoint.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "loader/gguf_model.h"

namespace tandem {
namespace fs = std::filesystem;
namespace {

nlohmann::json read_json_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open {}", path.string());
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not valid JSON: {}", path.string(), e.what());
  }
}

// weight_map as tensor -> shard file name, validated for shape.
std::map<std::string, std::string> read_weight_map(const fs::path& index) {
  nlohmann::json j = read_json_file(index);
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    fail("{}: missing 'weight_map' object", index.string());
  std::map<std::string, std::string> map;
  for (const auto& [name, file] : j["weight_map"].items()) {
    if (!file.is_string())
      fail("{}: weight_map entry for tensor '{}' is {}, not a file name", index.string(), name,
           file.type_name());
    map[name] = file.get<std::string>();
  }
  if (map.empty()) fail("{}: 'weight_map' is empty", index.string());
  return map;
}

}  // namespace

Checkpoint Checkpoint::open(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    fail("{} is not a directory (expected a model folder)", dir.string());
  Checkpoint c;
  c.dir_ = dir;
  fs::path index = dir / kIndexName;
  if (fs::exists(index, ec))
    c.open_indexed(index);
  else
    c.open_all_files();
  return c;
}

void Checkpoint::open_indexed(const fs::path& index) {
  std::map<std::string, std::shared_ptr<SafetensorsFile>> shards;  // file name -> opened once
  for (const auto& [name, shard_name] : read_weight_map(index)) {
    auto it = shards.find(shard_name);
    if (it == shards.end()) {
      fs::path shard = dir_ / shard_name;
      std::error_code ec;
      if (!fs::is_regular_file(shard, ec))
        fail("{}: shard '{}' (listed for tensor '{}') is missing from {}", index.string(),
             shard_name, name, dir_.string());
      it = shards.emplace(shard_name, SafetensorsFile::open(shard)).first;
      files_.push_back(it->second);
    }
    if (!it->second->has(name))
      fail("{}: tensor '{}' is listed in shard '{}' but absent from {}", index.string(), name,
           shard_name, it->second->path().string());
    where_[name] = it->second.get();
  }
}

void Checkpoint::open_all_files() {
  // Without an index: model.safetensors alone when the folder has it (other .safetensors
  // beside it — goldens, processor outputs — are not weights), else every *.safetensors.
  std::vector<fs::path> paths;
  std::error_code ec;
  if (fs::is_regular_file(dir_ / "model.safetensors", ec)) {
    paths.push_back(dir_ / "model.safetensors");
  } else {
    for (const auto& entry : fs::directory_iterator(dir_))
      if (entry.is_regular_file() && entry.path().extension() == ".safetensors")
        paths.push_back(entry.path());
  }
  if (paths.empty())
    fail("no weights in {}: neither {} nor any *.safetensors file", dir_.string(), kIndexName);
  std::sort(paths.begin(), paths.end());
  for (const fs::path& path : paths) {
    files_.push_back(SafetensorsFile::open(path));
    const SafetensorsFile* file = files_.back().get();
    for (const std::string& name : file->names()) {
      auto [it, inserted] = where_.emplace(name, file);
      if (!inserted)
        fail("tensor '{}' appears in both {} and {}", name, it->second->path().string(),
             path.string());
    }
  }
}

Checkpoint Checkpoint::from_gguf(std::shared_ptr<const GgufModel> model,
                                 std::map<std::string, GgufAlias> aliases) {
  Checkpoint c;
  c.dir_ = model->path();
  for (const auto& [name, alias] : aliases)
    if (!model->find(alias.gguf_name))
      fail("{}: tensor '{}' names GGUF tensor '{}', which the file does not hold",
           model->path().string(), name, alias.gguf_name);
  c.gguf_ = std::move(model);
  c.aliases_ = std::move(aliases);
  return c;
}

const SafetensorsFile& Checkpoint::file_of(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) {
    if (aliases_.count(name)) fail("tensor '{}' of {} is in a GGUF file, not a safetensors one", name, dir_.string());
    fail("tensor '{}' not found in {}", name, dir_.string());
  }
  return *it->second;
}

Tensor Checkpoint::get(const std::string& name) const {
  if (auto a = aliases_.find(name); a != aliases_.end()) return read_gguf_alias(*gguf_, name, a->second);
  return file_of(name).tensor(name);
}

DType Checkpoint::dtype(const std::string& name) const {
  if (auto a = aliases_.find(name); a != aliases_.end())
    return gguf_->find(a->second.gguf_name)->info->dtype;
  return file_of(name).entry(name).dtype;
}

std::string Checkpoint::stored_name(const std::string& name) const {
  auto a = aliases_.find(name);
  return a != aliases_.end() ? a->second.gguf_name : name;
}

void Checkpoint::prefetch(const std::string& name) const {
  if (auto a = aliases_.find(name); a != aliases_.end()) {
    const GgufModel::TensorRef* ref = gguf_->find(a->second.gguf_name);
    ref->file->prefetch(*ref->info);
    return;
  }
  file_of(name).prefetch(name);
}

void Checkpoint::release(const Tensor& host) const {
  if (!gguf_ || !host.defined()) return;
  for (const auto& shard : gguf_->shards()) shard->release(host.data, host.nbytes());
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t total = gguf_ ? gguf_->total_bytes() : 0;
  for (auto& f : files_) total += uint64_t(std::filesystem::file_size(f->path()));
  return total;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> names;
  names.reserve(where_.size() + aliases_.size());
  for (const auto& [name, file] : where_) names.push_back(name);
  for (const auto& [name, alias] : aliases_) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace tandem
