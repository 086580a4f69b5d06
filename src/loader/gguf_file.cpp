#include "loader/gguf_file.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <unordered_set>

#include "loader/gguf_cursor.h"

namespace tandem {
namespace {

constexpr size_t kHeaderBytes = 4 + 4 + 8 + 8;
// The smallest tensor info: name length, n_dims, type, offset (a 0-dim, 0-length name).
constexpr size_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;
// The smallest metadata entry: key length, value type, a one-byte value.
constexpr size_t kMinMetadataBytes = 8 + 4 + 1;

// A count the header declares, checked against the structural limit and against the bytes
// left (each item needs at least `min_bytes`).
void check_count(const GgufCursor& c, const char* what, uint64_t count, uint64_t limit,
                 size_t min_bytes) {
  if (count > limit)
    fail("{}: declares {} {} (tandem reads at most {})", c.source(), count, what, limit);
  if (count > c.remaining() / min_bytes)
    fail("{}: declares {} {}, but the {} bytes after offset {} hold at most {}", c.source(), count,
         what, c.remaining(), c.offset(), c.remaining() / min_bytes);
}

// n × m for tensor sizes, or an error naming the tensor.
uint64_t checked_mul(uint64_t n, uint64_t m, const std::string& source, std::string_view name) {
  uint64_t r;
  if (__builtin_mul_overflow(n, m, &r) || r > uint64_t(INT64_MAX))
    fail("{}: tensor '{}': its size overflows 64 bits", source, name);
  return r;
}

// Bytes a typed pointer into the tensor needs to be aligned to.
size_t element_alignment(DType t) { return dtype_is_block(t) ? 2 : std::min<size_t>(dtype_size(t), 4); }

}  // namespace

std::shared_ptr<const GgufFile> GgufFile::open(const std::filesystem::path& path) {
  std::shared_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  f->mapping_ = std::make_shared<MappedFile>(MappedFile::open_read(path));
  f->storage_ = f->mapping_;
  f->data_ = f->mapping_->data();
  f->size_ = f->mapping_->size();
  f->parse();
  return f;
}

std::shared_ptr<const GgufFile> GgufFile::from_bytes(std::string bytes, const std::string& name) {
  std::shared_ptr<GgufFile> f(new GgufFile());
  f->path_ = name;
  auto owned = std::make_shared<std::string>(std::move(bytes));
  f->data_ = reinterpret_cast<const std::byte*>(owned->data());
  f->size_ = owned->size();
  f->storage_ = std::move(owned);
  f->parse();
  return f;
}

void GgufFile::parse() {
  GgufCursor c(data_, size_, path_.string());
  uint64_t num_tensors = 0, num_metadata = 0;
  parse_header(c, num_tensors, num_metadata);
  parse_metadata(c, num_metadata);
  parse_tensor_infos(c, num_tensors);
  place_data(c.offset());
}

void GgufFile::parse_header(GgufCursor& c, uint64_t& num_tensors, uint64_t& num_metadata) {
  const std::string& source = c.source();
  if (c.remaining() < 4 || std::memcmp(data_, "GGUF", 4) != 0)
    fail("{}: not a GGUF file (it does not start with the bytes \"GGUF\")", source);
  if (c.remaining() < kHeaderBytes)
    fail("{}: {} bytes, too short for a GGUF header ({} bytes)", source, c.remaining(), kHeaderBytes);
  c.take(4, "magic");
  version_ = c.read<uint32_t>("version");
  if (version_ == 1)
    fail("{}: GGUF version 1 is not supported (tandem reads versions 2 and 3; convert the file again)",
         source);
  if (version_ != 2 && version_ != 3) {
    if ((version_ & 0xffff) == 0)
      fail("{}: version field 0x{:08x} looks byte-swapped: big-endian GGUF files are not supported",
           source, version_);
    fail("{}: unsupported GGUF version {} (tandem reads versions 2 and 3)", source, version_);
  }
  num_tensors = c.read<uint64_t>("tensor count");
  num_metadata = c.read<uint64_t>("metadata count");
  check_count(c, "tensors", num_tensors, kMaxTensors, kMinTensorInfoBytes);
  check_count(c, "metadata entries", num_metadata, kMaxMetadata, kMinMetadataBytes);
}

void GgufFile::parse_metadata(GgufCursor& c, uint64_t count) {
  std::vector<GgufMetadata::Entry> entries;
  entries.reserve(size_t(count));
  std::unordered_set<std::string_view> seen;
  for (uint64_t i = 0; i < count; i++) {
    std::string_view key = c.read_string(fmt::format("key of metadata entry {}", i), kMaxKeyBytes);
    if (key.empty()) fail("{}: metadata entry {} has an empty key", c.source(), i);
    if (!seen.insert(key).second) fail("{}: metadata key '{}' appears twice", c.source(), key);
    const std::string what = fmt::format("metadata '{}'", key);
    auto type = GgufType(c.read<uint32_t>(what));
    entries.push_back({key, read_gguf_value(c, type, what)});
  }
  metadata_ = GgufMetadata(path_.string(), std::move(entries));
  if (const GgufValue* a = metadata_.find("general.alignment")) {
    if (a->type() != GgufType::U32)
      fail("{} is {}, expected u32", metadata_.where("general.alignment"), a->type_description());
    alignment_ = uint64_t(a->as_int(""));
    if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0)
      fail("{} is {}, not a power of two", metadata_.where("general.alignment"), alignment_);
  }
}

void GgufFile::parse_tensor_infos(GgufCursor& c, uint64_t count) {
  check_count(c, "tensors", count, kMaxTensors, kMinTensorInfoBytes);
  tensors_.reserve(size_t(count));
  const std::string& source = c.source();
  for (uint64_t i = 0; i < count; i++) {
    GgufTensorInfo t;
    t.name = c.read_string(fmt::format("name of tensor {}", i), kMaxKeyBytes);
    if (t.name.empty() || t.name.size() > kMaxNameBytes)
      fail("{}: tensor {} has a name of {} bytes (ggml names are 1 to {} bytes)", source, i,
           t.name.size(), kMaxNameBytes);
    if (!tensor_index_.emplace(t.name, tensors_.size()).second)
      fail("{}: tensor '{}' appears twice", source, t.name);
    const std::string what = fmt::format("tensor '{}'", t.name);
    const uint32_t n_dims = c.read<uint32_t>(what);
    if (n_dims > uint32_t(kMaxDims))
      fail("{}: {} has {} dims (GGUF tensors have at most {})", source, what, n_dims, kMaxDims);
    int64_t ne[kMaxDims] = {1, 1, 1, 1};
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
      ne[d] = c.read<int64_t>(what);
      if (ne[d] < 0) fail("{}: {} has a negative size {} in dim {}", source, what, ne[d], d);
      // ggml allows empty tensors; no model has one, and tandem's tensors need rows of > 0.
      if (ne[d] == 0) fail("{}: {} is empty (size 0 in dim {})", source, what, d);
      numel = checked_mul(numel, uint64_t(ne[d]), source, t.name);
    }
    t.ggml_type = c.read<uint32_t>(what);
    auto dtype = dtype_from_ggml_type(t.ggml_type);
    if (!dtype)
      fail("{}: {} has type {}, which tandem does not read (it reads {})", source, what,
           ggml_type_name(t.ggml_type), supported_ggml_types());
    t.dtype = *dtype;
    const DTypeBlock block = dtype_block(t.dtype);
    if (ne[0] % block.elems != 0)
      fail("{}: {} of type {} has rows of {} values, not a whole number of {}-value blocks",
           source, what, ggml_type_name(t.ggml_type), ne[0], block.elems);
    t.nbytes = checked_mul(numel / uint64_t(block.elems), uint64_t(block.bytes), source, t.name);
    t.shape.ndim = int(n_dims);
    for (uint32_t d = 0; d < n_dims; d++) t.shape.dims[n_dims - 1 - d] = ne[d];
    t.offset = c.read<uint64_t>(what);
    if (t.offset % alignment_ != 0)
      fail("{}: {} data offset {} is not a multiple of the alignment {}", source, what, t.offset,
           alignment_);
    tensors_.push_back(t);
  }
}

void GgufFile::place_data(size_t infos_end) {
  const std::string source = path_.string();
  const uint64_t size = size_;
  data_offset_ = (uint64_t(infos_end) + alignment_ - 1) / alignment_ * alignment_;
  if (tensors_.empty()) return;
  if (data_offset_ > size)
    fail("{}: the data section would start at byte {}, past the end of the file ({} bytes; truncated?)",
         source, data_offset_, size);
  const uint64_t data_size = size - data_offset_;
  for (const GgufTensorInfo& t : tensors_)
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      fail("{}: tensor '{}' bytes [{}, {}) of the data section run past its end ({} bytes; "
           "truncated file?)",
           source, t.name, t.offset, t.offset + t.nbytes, data_size);
  // Overlapping tensors would alias each other's weights: a corrupt or hostile header.
  std::vector<const GgufTensorInfo*> by_offset;
  for (const GgufTensorInfo& t : tensors_)
    if (t.nbytes > 0) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); i++) {
    const GgufTensorInfo& prev = *by_offset[i - 1];
    const GgufTensorInfo& t = *by_offset[i];
    if (t.offset < prev.offset + prev.nbytes)
      fail("{}: tensor '{}' bytes [{}, {}) overlap tensor '{}' bytes [{}, {})", source, t.name,
           t.offset, t.offset + t.nbytes, prev.name, prev.offset, prev.offset + prev.nbytes);
  }
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Tensor GgufFile::tensor(const GgufTensorInfo& info) const {
  const std::byte* bytes = data_ + data_offset_ + info.offset;
  if (reinterpret_cast<uintptr_t>(bytes) % element_alignment(info.dtype) != 0) {
    Tensor copy = Tensor::empty_host(info.dtype, info.shape);
    std::memcpy(copy.data, bytes, info.nbytes);
    return copy;
  }
  Tensor t;
  t.dtype = info.dtype;
  t.shape = info.shape;
  t.data = const_cast<std::byte*>(bytes);
  t.storage = storage_;
  return t;
}

void GgufFile::prefetch(const GgufTensorInfo& info) const {
  if (mapping_) mapping_->advise_willneed(data_offset_ + info.offset, info.nbytes);
}

bool is_gguf_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

}  // namespace tandem
