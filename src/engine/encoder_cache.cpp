#include "engine/encoder_cache.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace tandem {

std::vector<Tensor> EncoderCache::get(std::span<const ImageInput* const> images,
                                      const Encoder& encode) {
  std::vector<const ImageInput*> missing;
  std::vector<uint64_t> keep;
  for (const ImageInput* im : images) {
    keep.push_back(im->content_hash);
    auto it = by_hash_.find(im->content_hash);
    if (it != by_hash_.end()) {
      entries_.splice(entries_.begin(), entries_, it->second);  // now the most recent
      continue;
    }
    const bool queued = std::any_of(missing.begin(), missing.end(), [&](const ImageInput* m) {
      return m->content_hash == im->content_hash;
    });
    if (!queued) missing.push_back(im);
  }
  if (!missing.empty()) {
    if (timed_ && synchronize_) backend_->synchronize();  // the steps before are not ours
    const auto started = std::chrono::steady_clock::now();
    const Tensor all = encode(missing);
    if (timed_) {
      if (synchronize_) backend_->synchronize();
      encode_seconds_ +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    }
    int64_t row = 0;
    for (const ImageInput* im : missing) {
      TANDEM_CHECK(row + im->num_soft_tokens <= all.dim(0),
                   "encoder: {} rows for images of {} soft tokens and more", all.dim(0), row);
      Tensor rows = all.slice_rows(row, im->num_soft_tokens);
      if (missing.size() > 1) {  // its own storage: evicting it frees it
        Tensor own = backend_->alloc(rows.dtype, rows.shape);
        backend_->copy(own, rows);
        rows = own;
      }
      row += im->num_soft_tokens;
      entries_.push_front({im->content_hash, rows});
      by_hash_[im->content_hash] = entries_.begin();
      bytes_ += int64_t(rows.nbytes());
      num_encoded_++;
    }
    TANDEM_CHECK(row == all.dim(0), "encoder: {} rows for images of {} soft tokens", all.dim(0),
                 row);
  }
  std::vector<Tensor> out;
  for (const ImageInput* im : images) {
    const Tensor& rows = by_hash_.at(im->content_hash)->rows;
    TANDEM_CHECK(rows.dim(0) == im->num_soft_tokens,
                 "encoder cache: an image of {} soft tokens has the content hash of one of {}",
                 im->num_soft_tokens, rows.dim(0));
    out.push_back(rows);
  }
  evict(keep);
  return out;
}

void EncoderCache::evict(const std::vector<uint64_t>& keep) {
  for (auto it = entries_.end(); bytes_ > capacity_ && it != entries_.begin();) {
    --it;
    if (std::find(keep.begin(), keep.end(), it->hash) != keep.end()) continue;
    bytes_ -= int64_t(it->rows.nbytes());
    by_hash_.erase(it->hash);
    it = entries_.erase(it);
  }
}

}  // namespace tandem
