#include "loader/safetensors_writer.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "loader/checkpoint.h"
#include "loader/output_file.h"

namespace tandem {
namespace fs = std::filesystem;
namespace {

// Small enough to stay in the last-level cache between the fill and the pwrite that
// copies it into the page cache; large enough that a pwrite costs little per byte.
constexpr size_t kChunkBytes = size_t(4) << 20;

// HF's data order: larger element types first, so every offset stays aligned.
int alignment_rank(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return 0;
    case DType::I32:
      return 1;
    case DType::BF16:
      return 2;
    case DType::F16:
      return 3;
    case DType::F8E4M3:
      return 4;
    default:  // block types never reach a safetensors file (dtype_safetensors_name refuses them)
      return 5;
  }
}

// Consecutive bytes of a file, produced into one buffer and written when it fills.
class ChunkedStream {
 public:
  ChunkedStream(OutputFile& out, uint64_t pos) : out_(out), buf_(kChunkBytes), pos_(pos) {}

  // The next `bytes` of the file, produced by `fill` in whole elements of `element_size`.
  void append(const SafetensorsWriter::ChunkFill& fill, uint64_t bytes, size_t element_size) {
    for (uint64_t offset = 0; offset < bytes;) {
      size_t space = (buf_.size() - used_) / element_size * element_size;
      if (space == 0) {
        flush();
        continue;
      }
      size_t n = size_t(std::min<uint64_t>(bytes - offset, space));
      fill(buf_.data() + used_, size_t(offset), n);
      used_ += n;
      offset += n;
    }
  }

  // The next `bytes` of the file, staged whole for a fill that cannot work in pieces.
  void append_whole(const SafetensorsWriter::Fill& fill, uint64_t bytes) {
    flush();
    std::unique_ptr<std::byte[]> staged(new std::byte[bytes]);  // uninitialized on purpose
    fill(staged.get(), bytes);
    out_.write_at(staged.get(), bytes, pos_);
    pos_ += bytes;
  }

  void flush() {
    if (used_ > 0) out_.write_at(buf_.data(), used_, pos_);
    pos_ += used_;
    used_ = 0;
  }

 private:
  OutputFile& out_;
  std::vector<std::byte> buf_;
  size_t used_ = 0;  // bytes of buf_ holding data not yet written
  uint64_t pos_;     // file offset of buf_[0]
};

// The 8-byte length and the header JSON, padded with spaces to a multiple of 8 bytes.
std::string header_prefix(const nlohmann::ordered_json& header) {
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string prefix(8, '\0');
  for (int i = 0; i < 8; i++) prefix[size_t(i)] = char((uint64_t(text.size()) >> (8 * i)) & 0xff);
  return prefix + text;
}

std::string shard_name(size_t k, size_t n) {
  return n == 1 ? "model.safetensors" : fmt::format("model-{:05d}-of-{:05d}.safetensors", k + 1, n);
}

// Weight files already in `dir` that this write would not overwrite.
void check_no_stale_weights(const fs::path& dir, const std::set<std::string>& ours) {
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    bool weights = entry.path().extension() == ".safetensors" || name == Checkpoint::kIndexName;
    if (weights && !ours.count(name))
      fail(
          "{}: already holds {}, which would mix with the weights being written; use an "
          "empty folder",
          dir.string(), name);
  }
}

}  // namespace

void SafetensorsWriter::add_pending(Pending t) {
  if (t.name.empty() || t.name == "__metadata__")
    fail("safetensors writer: invalid tensor name '{}'", t.name);
  if (names_.count(t.name)) fail("safetensors writer: tensor '{}' added twice", t.name);
  t.bytes = dtype_size(t.dtype);
  for (int64_t d : t.shape) {
    if (d < 0) fail("safetensors writer: tensor '{}' has negative dim {}", t.name, d);
    if (__builtin_mul_overflow(t.bytes, uint64_t(d), &t.bytes))
      fail("safetensors writer: tensor '{}' is too large", t.name);
  }
  names_.insert(t.name);
  tensors_.push_back(std::move(t));
}

void SafetensorsWriter::add(std::string name, DType dtype, std::vector<int64_t> shape, Fill fill) {
  add_pending({std::move(name), dtype, std::move(shape), 0, std::move(fill), nullptr});
}

void SafetensorsWriter::add_chunked(std::string name, DType dtype, std::vector<int64_t> shape,
                                    ChunkFill fill) {
  add_pending({std::move(name), dtype, std::move(shape), 0, nullptr, std::move(fill)});
}

void SafetensorsWriter::add(std::string name, const Tensor& tensor) {
  TANDEM_CHECK(tensor.device == Device::CPU, "tensor '{}' must be on the CPU", name);
  std::vector<int64_t> shape(tensor.shape.dims.begin(), tensor.shape.dims.begin() + tensor.ndim());
  add_chunked(std::move(name), tensor.dtype, std::move(shape),
              [tensor](void* dst, size_t offset, size_t bytes) {
                std::memcpy(dst, static_cast<const std::byte*>(tensor.data) + offset, bytes);
              });
}

uint64_t SafetensorsWriter::total_bytes() const {
  uint64_t total = 0;
  for (const Pending& t : tensors_) total += t.bytes;
  return total;
}

void SafetensorsWriter::write(const fs::path& path,
                              const std::map<std::string, std::string>& metadata) const {
  Group all;
  for (const Pending& t : tensors_) all.push_back(&t);
  write_file(path, std::move(all), metadata);
}

void SafetensorsWriter::write_file(const fs::path& path, Group group,
                                   const std::map<std::string, std::string>& metadata) {
  std::sort(group.begin(), group.end(), [](const Pending* a, const Pending* b) {
    int ra = alignment_rank(a->dtype), rb = alignment_rank(b->dtype);
    return ra != rb ? ra < rb : a->name < b->name;
  });
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t data_size = 0;  // tensors are contiguous, in `group` order
  for (const Pending* t : group) {
    header[t->name] = {{"dtype", dtype_safetensors_name(t->dtype)},
                       {"shape", t->shape},
                       {"data_offsets", {data_size, data_size + t->bytes}}};
    data_size += t->bytes;
  }
  std::string prefix = header_prefix(header);
  OutputFile out(path);
  out.write_at(prefix.data(), prefix.size(), 0);
  ChunkedStream stream(out, prefix.size());
  for (const Pending* t : group) {
    if (t->bytes == 0) continue;
    if (t->chunk_fill)
      stream.append(t->chunk_fill, t->bytes, dtype_size(t->dtype));
    else
      stream.append_whole(t->fill, t->bytes);
  }
  stream.flush();
  out.commit();
}

std::vector<SafetensorsWriter::Group> SafetensorsWriter::plan_shards(uint64_t max_bytes) const {
  std::vector<Group> shards(1);
  uint64_t current = 0;
  for (const Pending& t : tensors_) {
    if (!shards.back().empty() && current + t.bytes > max_bytes) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(&t);
    current += t.bytes;
  }
  return shards;
}

std::vector<fs::path> SafetensorsWriter::write_sharded(
    const fs::path& dir, uint64_t max_shard_bytes,
    const std::map<std::string, std::string>& metadata) const {
  if (max_shard_bytes == 0) fail("write_sharded: max_shard_bytes must be positive");
  fs::create_directories(dir);
  std::vector<Group> shards = plan_shards(max_shard_bytes);
  std::set<std::string> ours;
  for (size_t k = 0; k < shards.size(); k++) ours.insert(shard_name(k, shards.size()));
  if (shards.size() > 1) ours.insert(Checkpoint::kIndexName);
  check_no_stale_weights(dir, ours);

  std::vector<fs::path> written;
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t k = 0; k < shards.size(); k++) {
    std::string name = shard_name(k, shards.size());
    for (const Pending* t : shards[k]) weight_map[t->name] = name;
    write_file(dir / name, shards[k], metadata);
    written.push_back(dir / name);
  }
  if (shards.size() > 1) {
    nlohmann::json index = {{"metadata", {{"total_size", total_bytes()}}},
                            {"weight_map", weight_map}};
    std::string text = index.dump(2) + "\n";
    OutputFile out(dir / Checkpoint::kIndexName);
    out.write_at(text.data(), text.size(), 0);
    out.commit();
    written.push_back(dir / Checkpoint::kIndexName);
  }
  return written;
}

}  // namespace tandem
