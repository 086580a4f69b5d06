#include "model/weight_map.h"

#include <fmt/format.h>

#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace tandem {

std::string expand_name(const std::string& pattern, int layer, int expert) {
  std::string s = pattern;
  auto replace = [&](const char* key, int value) {
    for (size_t pos; value >= 0 && (pos = s.find(key)) != std::string::npos;)
      s.replace(pos, std::strlen(key), std::to_string(value));
  };
  replace("{i}", layer);
  replace("{e}", expert);
  return s;
}

void set_rule(WeightMap& map, WeightRule rule) {
  for (auto& r : map)
    if (r.name == rule.name) {
      r = std::move(rule);
      return;
    }
  map.push_back(std::move(rule));
}

bool lora_projection(const std::string& name) {
  for (const char* p : {"qkv", "q", "qk", "o", "gate_up", "down"})
    if (name == std::string("layers.{i}.") + p) return true;
  return false;
}

WeightLoader::WeightLoader(const Checkpoint& checkpoint, Backend& backend, WeightMap map,
                           int num_experts, LoraTargets* lora)
    : checkpoint_(checkpoint),
      backend_(backend),
      map_(std::move(map)),
      num_experts_(num_experts),
      lora_(lora && lora->capacity.enabled() ? lora : nullptr) {
  total_bytes_ = int64_t(checkpoint_.total_bytes());
}

void WeightLoader::report_progress(int64_t bytes) {
  // Large checkpoints only (a real model on its way to the GPU): a line per 10%.
  loaded_bytes_ += bytes;
  if (total_bytes_ < (int64_t(1) << 30)) return;
  int tenth = int(std::min<int64_t>(10, loaded_bytes_ * 10 / total_bytes_));
  if (tenth <= reported_tenths_) return;
  reported_tenths_ = tenth;
  fmt::print(stderr, "loading weights onto {}: {:3d}% ({:.1f} / {:.1f} GB)\n", backend_.name(),
             tenth * 10, double(loaded_bytes_) / 1e9, double(total_bytes_) / 1e9);
}

const WeightRule* WeightLoader::find(const std::string& name) const {
  for (auto& r : map_)
    if (r.name == name) return &r;
  return nullptr;
}

Tensor WeightLoader::read_source(const std::string& pattern, int layer, int expert) const {
  return checkpoint_.get(expand_name(pattern, layer, expert));
}

namespace {

// Concatenates host tensors along dim 0 into one host tensor (same dtype, same trailing
// dims); a single piece is returned as is (no copy: it stays in the mapped file).
Tensor concat_rows(const std::vector<Tensor>& parts, const std::string& what) {
  if (parts.size() == 1) return parts[0];
  DType dtype = parts[0].dtype;
  bool vectors = parts[0].ndim() == 1;  // biases: concatenate elements
  auto width = [&](const Tensor& t) { return vectors ? 1 : t.cols(); };
  int64_t rows = 0, cols = width(parts[0]);
  for (auto& p : parts) {
    if (p.dtype != dtype || width(p) != cols || (p.ndim() == 1) != vectors)
      fail("{}: pieces disagree in dtype or shape ({} {} vs {} {}){}", what, dtype_name(dtype),
           parts[0].shape.str(), dtype_name(p.dtype), p.shape.str(),
           p.dtype != dtype ? " — stacked experts whose projections differ in weight type are not "
                              "supported"
                            : "");
    rows += vectors ? p.numel() : p.rows();
  }
  Tensor out = vectors ? Tensor::empty_host(dtype, {rows}) : Tensor::empty_host(dtype, {rows, cols});
  char* dst = static_cast<char*>(out.data);
  for (auto& p : parts) {
    std::memcpy(dst, p.data, p.nbytes());
    dst += p.nbytes();
  }
  return out;
}

}  // namespace

std::optional<Tensor> WeightLoader::read(const std::string& name, int layer, Shape expected,
                                         bool must_exist) {
  const WeightRule* rule = find(name);
  std::string label = expand_name(name, layer);
  if (!rule) {
    if (must_exist) fail("{}: no rule for weight '{}' in this architecture's map", checkpoint_.dir().string(), label);
    return std::nullopt;
  }
  int present = 0;
  for (auto& src : rule->sources)
    present += checkpoint_.has(expand_name(src, layer, src.find("{e}") != std::string::npos ? 0 : -1));
  if (present == 0 && rule->optional) return std::nullopt;

  const WeightSlice slice = slicer_ ? slicer_(name, layer) : WeightSlice{};
  if (slice.kind == WeightSlice::Kind::Absent) return std::nullopt;
  counts_upload_ = slice.kind != WeightSlice::Kind::Whole || tp_rank_ == 0;
  auto concat = [&](const std::vector<Tensor>& parts) { return concat_rows(parts, label); };
  bool stacked = rule->sources[0].find("{e}") != std::string::npos;
  std::vector<Tensor> pieces;
  for (int e = 0; e < (stacked ? num_experts_ : 1); e++) {
    std::vector<Tensor> parts;
    for (auto& src : rule->sources) parts.push_back(read_source(src, layer, stacked ? e : -1));
    try {
      pieces.push_back(slice_parts(parts, slice, label, concat));
    } catch (const Error& err) {
      fail("{}: {} (tensor '{}')", checkpoint_.dir().string(), err.what(),
           checkpoint_.stored_name(expand_name(rule->sources[0], layer, stacked ? e : -1)));
    }
  }
  Tensor host = concat_rows(pieces, label);
  if (stacked) {  // [E·R, C] → [E, R, C]
    int64_t per = host.rows() / num_experts_;
    host = host.reshape({int64_t(num_experts_), per, host.cols()});
  } else if (expected.ndim != host.ndim() && expected.numel() == host.numel()) {
    host = host.reshape(expected);  // e.g. a [1] scalar stored as []
  }
  if (!(host.shape == expected))
    fail("{}: weight '{}' has shape {} but the config implies {}", checkpoint_.dir().string(),
         label, host.shape.str(), expected.str());
  return host;
}

void WeightLoader::set_slicer(WeightSlicer slicer, int rank) {
  slicer_ = std::move(slicer);
  tp_rank_ = rank;
}

Tensor WeightLoader::upload(const Tensor& host) {
  if (counts_upload_) num_parameters_ += host.numel();
  counts_upload_ = true;
  Tensor device = backend_.upload(host, backend_.weight_dtype(host.dtype));
  checkpoint_.release(host);  // the backend holds its own copy now
  report_progress(int64_t(host.nbytes()));
  return device;
}

Tensor WeightLoader::load(const std::string& name, int layer, Shape expected, bool must_exist) {
  std::optional<Tensor> host = read(name, layer, expected, must_exist);
  if (host && host->dtype == DType::F8E4M3)
    fail("{}: weight '{}' is stored in FP8, which tandem reads for linear projections and "
         "Mixtral / Qwen3-MoE experts only (FP8 embeddings, norms and Gemma 4 experts are not "
         "supported)",
         checkpoint_.dir().string(), expand_name(name, layer));
  return host ? upload(*host) : Tensor{};
}

bool WeightLoader::mixed_types(const WeightRule& rule, int layer) const {
  if (rule.sources.size() < 2 || rule.sources[0].find("{e}") != std::string::npos) return false;
  std::optional<DType> first;
  for (const std::string& src : rule.sources) {
    const std::string name = expand_name(src, layer);
    if (!checkpoint_.has(name)) return false;  // read() reports what is missing
    const DType d = checkpoint_.dtype(name);
    if (first && *first != d) return true;
    first = d;
  }
  return false;
}

Linear WeightLoader::load_pieces(const WeightRule& rule, int layer, Shape expected) {
  const std::string label = expand_name(rule.name, layer);
  // The bias is read as the slicer cuts it, so its rows follow the pieces' rows in order.
  std::optional<Tensor> bias =
      read(rule.name + "_bias", layer, {expected[0]}, /*must_exist=*/false);
  const WeightSlice slice = slicer_ ? slicer_(rule.name, layer) : WeightSlice{};
  if (slice.kind != WeightSlice::Kind::Whole && slice.kind != WeightSlice::Kind::Rows)
    fail(
        "{}: weight '{}': its sources differ in type, and tensor parallelism cuts such a "
        "projection by rows only",
        checkpoint_.dir().string(), label);
  Linear l;
  int64_t row = 0, fused_row = 0;  // in this rank's projection; the source's in the whole one
  for (const std::string& src : rule.sources) {
    const std::string name = expand_name(src, layer);
    Tensor host = checkpoint_.get(name);
    if (host.ndim() != 2 || host.dim(1) != expected[1])
      fail("{}: weight '{}': piece '{}' has shape {}, which does not fit the {} the config implies",
           checkpoint_.dir().string(), label, name, host.shape.str(), expected.str());
    // The source's rows this rank holds: all of them, or where the slice's ranges cross it.
    std::vector<WeightSlice::Range> mine = {{0, host.dim(0)}};
    if (slice.kind == WeightSlice::Kind::Rows) {
      mine.clear();
      for (const WeightSlice::Range& r : slice.rows) {
        const int64_t lo = std::max(r.begin, fused_row),
                      hi = std::min(r.begin + r.count, fused_row + host.dim(0));
        if (lo < hi) mine.push_back({lo - fused_row, hi - lo});
      }
    }
    fused_row += host.dim(0);
    for (const WeightSlice::Range& r : mine) {
      if (row + r.count > expected[0])
        fail("{}: weight '{}': its pieces have more rows than the {} the config implies",
             checkpoint_.dir().string(), label, expected.str());
      Linear piece{.weight = upload(host.slice_rows(r.begin, r.count))};
      if (bias) piece.bias = upload(bias->slice_rows(row, r.count));
      row += r.count;
      l.pieces.push_back(std::move(piece));
    }
  }
  if (row != expected[0])
    fail("{}: weight '{}': its pieces have {} rows but the config implies {}",
         checkpoint_.dir().string(), label, row, expected[0]);
  return l;
}

Linear WeightLoader::load_linear(const std::string& name, int layer, Shape expected,
                                 bool must_exist) {
  Linear l;
  const WeightRule* rule = find(name);
  if (rule && loads_as_fp8(*rule, layer)) {
    l = load_fp8_linear(*rule, layer, expected);
  } else if (rule && mixed_types(*rule, layer)) {
    l = load_pieces(*rule, layer, expected);  // each piece carries its slice of the bias
  } else {
    std::optional<Tensor> host = read(name, layer, expected, must_exist);
    if (!host) return l;
    l.weight = upload(*host);
  }
  if (l.pieces.empty()) l.bias = load(name + "_bias", layer, {expected[0]}, /*must_exist=*/false);
  if (lora_ && lora_projection(name)) add_lora_slots(l, *find(name), layer);
  return l;
}

void WeightLoader::add_lora_slots(Linear& l, const WeightRule& rule, int layer) {
  LoraTarget t{.layer = layer, .in_features = l.in_features()};
  t.full_in_features = t.in_features;
  // Under tensor parallelism the adapter is cut like its base weight (model/tp_slices.h):
  // B's rows where the weight's rows are split, A's columns where its columns are.
  const WeightSlice slice = slicer_ ? slicer_(rule.name, layer) : WeightSlice{};
  int64_t fused_row = 0;  // the source's first row in the whole fused projection
  for (auto& src : rule.sources) {
    std::string weight = expand_name(src, layer);
    const std::string suffix = ".weight";
    TANDEM_CHECK(weight.size() > suffix.size() && weight.ends_with(suffix),
                 "LoRA: projection source '{}' is not a '.weight' tensor", weight);
    const Tensor source = checkpoint_.get(weight);
    LoraShard shard{.module = weight.substr(0, weight.size() - suffix.size()),
                    .row_offset = t.out_features,
                    .num_rows = source.dim(0),
                    .full_rows = source.dim(0)};
    if (slice.kind == WeightSlice::Kind::Rows) {
      shard.num_rows = 0;
      for (const WeightSlice::Range& r : slice.rows) {
        const int64_t lo = std::max(r.begin, fused_row);
        const int64_t hi = std::min(r.begin + r.count, fused_row + source.dim(0));
        if (lo >= hi) continue;
        shard.source_rows.push_back({lo - fused_row, hi - lo});
        shard.num_rows += hi - lo;
      }
    } else if (slice.kind == WeightSlice::Kind::Columns) {
      t.a_first_col = slice.columns.begin;
      t.full_in_features = source.dim(1);
    }
    fused_row += source.dim(0);
    t.out_features += shard.num_rows;
    t.shards.push_back(std::move(shard));
  }
  TANDEM_CHECK(t.out_features == l.out_features(), "LoRA: the sources of '{}' have {} rows, the projection {}",
               expand_name(rule.name, layer), t.out_features, l.out_features());
  const LoraCapacity& c = lora_->capacity;
  int64_t R = int64_t(c.max_rank) * int64_t(t.shards.size());
  t.bank.a = backend_.zeros(backend_.act_dtype(), {c.num_slots(), R, t.in_features});
  t.bank.b = backend_.zeros(backend_.act_dtype(), {c.num_slots(), t.out_features, R});
  for (const LoraShard& shard : t.shards) t.bank.shard_ends.push_back(shard.row_offset + shard.num_rows);
  l.lora = t.bank;
  lora_->targets.push_back(std::move(t));
}

Linear WeightLoader::load_lm_head(const Tensor& embed, Shape expected, bool tied) {
  Linear head = load_linear("lm_head", -1, expected);
  if (head.defined()) return head;
  if (!tied)
    fail("{}: tensor 'lm_head.weight' not found and tie_word_embeddings is false",
         checkpoint_.dir().string());
  return Linear{.weight = embed};
}

}  // namespace tandem
