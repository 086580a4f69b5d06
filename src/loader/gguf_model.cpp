#include "loader/gguf_model.h"

#include <algorithm>
#include <map>
#include <regex>

#include "core/error.h"

namespace tandem {
namespace {

constexpr const char* kSplitNo = "split.no";
constexpr const char* kSplitCount = "split.count";
constexpr const char* kSplitTensors = "split.tensors.count";

int64_t split_value(const GgufFile& f, const char* key, int64_t fallback) {
  return f.metadata().get_int(key).value_or(fallback);
}

}  // namespace

std::filesystem::path gguf_shard_path(const std::string& prefix, int shard, int count) {
  return fmt::format("{}-{:05d}-of-{:05d}.gguf", prefix, shard, count);
}

std::shared_ptr<const GgufModel> GgufModel::open(const std::filesystem::path& path) {
  std::shared_ptr<GgufModel> m(new GgufModel());
  m->path_ = path;
  m->add_shard(GgufFile::open(path));
  const GgufFile& first = *m->shards_.front();
  const int64_t count = split_value(first, kSplitCount, 1);
  if (count < 1 || count > 65535)
    fail("{} is {}, not a shard count in 1..65535", first.metadata().where(kSplitCount), count);
  if (count == 1) return m;
  const int64_t no = split_value(first, kSplitNo, 0);
  if (no != 0)
    fail("{} is shard {} of {} of a split model: give the first shard ({})", path.string(), no + 1,
         count, "NAME-00001-of-" + fmt::format("{:05d}", count) + ".gguf");
  m->open_other_shards(count);
  const int64_t declared = split_value(first, kSplitTensors, -1);
  if (declared >= 0 && uint64_t(declared) != m->names_.size())
    fail("{} is {}, but the {} shards hold {} tensors", first.metadata().where(kSplitTensors),
         declared, count, m->names_.size());
  return m;
}

void GgufModel::open_other_shards(int64_t count) {
  const std::string name = path_.filename().string();
  std::smatch match;
  static const std::regex kPattern(R"((.*)-(\d{5})-of-(\d{5})\.gguf)");
  if (!std::regex_match(name, match, kPattern) || std::stoi(match[2]) != 1 ||
      std::stoi(match[3]) != count)
    fail("{}: the first shard of a {}-shard model must be named NAME-00001-of-{:05d}.gguf",
         path_.string(), count, count);
  const std::string prefix = (path_.parent_path() / match[1].str()).string();
  for (int shard = 2; shard <= count; shard++) {
    std::filesystem::path p = gguf_shard_path(prefix, shard, int(count));
    std::error_code ec;
    if (!std::filesystem::is_regular_file(p, ec))
      fail("{}: shard {} of {} is missing ({})", path_.string(), shard, count, p.string());
    auto file = GgufFile::open(p);
    if (split_value(*file, kSplitNo, -1) != shard - 1 || split_value(*file, kSplitCount, -1) != count)
      fail("{}: its {} and {} say it is not shard {} of {}", p.string(), kSplitNo, kSplitCount,
           shard, count);
    add_shard(std::move(file));
  }
}

void GgufModel::add_shard(std::shared_ptr<const GgufFile> file) {
  for (const GgufTensorInfo& info : file->tensors()) {
    auto [it, inserted] = tensors_.emplace(info.name, TensorRef{file.get(), &info});
    if (!inserted)
      fail("tensor '{}' appears in both {} and {}", info.name, it->second.file->path().string(),
           file->path().string());
    names_.push_back(info.name);
  }
  shards_.push_back(std::move(file));
}

const GgufModel::TensorRef* GgufModel::find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

Tensor GgufModel::tensor(std::string_view name) const {
  const TensorRef* ref = find(name);
  if (!ref) fail("{}: tensor '{}' not found", path_.string(), name);
  return ref->file->tensor(*ref->info);
}

std::string gguf_file_type_name(int64_t t) {
  // llama.h's enum llama_ftype; empty slots were removed.
  static const char* const kNames[] = {
      "F32",     "F16",    "Q4_0",    "Q4_1",   "",       "",       "",       "Q8_0",
      "Q5_0",    "Q5_1",   "Q2_K",    "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M",
      "Q5_K_S",  "Q5_K_M", "Q6_K",    "IQ2_XXS", "IQ2_XS", "Q2_K_S", "IQ3_XS", "IQ3_XXS",
      "IQ1_S",   "IQ4_NL", "IQ3_S",   "IQ3_M",  "IQ2_S",  "IQ2_M",  "IQ4_XS", "IQ1_M",
      "BF16"};
  if (t >= 0 && t < int64_t(std::size(kNames)) && kNames[t][0] != '\0') return kNames[t];
  return fmt::format("file_type {}", t);
}

std::string gguf_weight_summary(const GgufModel& model) {
  std::map<DType, int> counts;
  for (const auto& shard : model.shards())
    for (const GgufTensorInfo& t : shard->tensors()) counts[t.dtype]++;
  std::vector<std::pair<int, DType>> order;
  for (auto [dtype, n] : counts) order.emplace_back(-n, dtype);
  std::sort(order.begin(), order.end());
  auto file_type = model.metadata().get_int("general.file_type");
  std::string out = file_type ? gguf_file_type_name(*file_type) : "GGUF";
  for (size_t i = 0; i < order.size(); i++)
    out += fmt::format("{}{} {}", i ? ", " : ": ", dtype_name(order[i].second), -order[i].first);
  return out;
}

uint64_t GgufModel::total_bytes() const {
  uint64_t total = 0;
  for (auto& s : shards_) total += s->file_size();
  return total;
}

}  // namespace tandem
