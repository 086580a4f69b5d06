#include "vision_fixture.h"

#include <cstring>

#include "loader/safetensors.h"
#include "oracle_fixture.h"

namespace tandem::test {

namespace {

Tensor host_copy(const Tensor& t) {
  Tensor out = Tensor::empty_host(t.dtype, t.shape);
  std::memcpy(out.data, t.data, t.nbytes());
  return out;
}

uint64_t fnv(const void* data, size_t n, uint64_t h = 1469598103934665603ull) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// The runs of `id` in `prompt`, in order.
std::vector<std::pair<int, int>> runs_of(const std::vector<int32_t>& prompt, int32_t id) {
  std::vector<std::pair<int, int>> runs;
  for (int p = 0; p < int(prompt.size()); p++) {
    if (prompt[size_t(p)] != id) continue;
    if (runs.empty() || runs.back().second != p) runs.push_back({p, p});
    runs.back().second = p + 1;
  }
  return runs;
}

}  // namespace

std::filesystem::path vision_oracle_dir(const std::string& name) {
  return std::filesystem::path(TANDEM_TEST_DATA) / "oracle" / "vision" / name;
}

std::vector<VisionCase> load_vision_oracle(const std::string& name, int32_t image_token_id) {
  auto file = SafetensorsFile::open(vision_oracle_dir(name) / "golden.safetensors");
  std::vector<VisionCase> out;
  for (int i = 0; file->has("input_ids." + std::to_string(i)); i++) {
    const std::string s = std::to_string(i);
    VisionCase c;
    c.prompt = ids_of(file->tensor("input_ids." + s));
    c.greedy = ids_of(file->tensor("greedy." + s));
    c.logits = host_copy(file->tensor("logits." + s));
    const auto runs = runs_of(c.prompt, image_token_id);
    for (size_t j = 0; j < runs.size(); j++) {
      const std::string k = s + "." + std::to_string(j);
      auto image = std::make_shared<ImageInput>();
      image->pixels = host_copy(file->tensor("pixel_values." + k));
      if (file->has("image_position_ids." + k))
        image->position_ids = ids_of(file->tensor("image_position_ids." + k));
      image->num_soft_tokens = runs[j].second - runs[j].first;
      image->content_hash = fnv(image->pixels.data, image->pixels.nbytes(),
                                fnv(image->position_ids.data(), image->position_ids.size() * 4));
      c.media.push_back({runs[j].first, runs[j].second - runs[j].first, image});
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::shared_ptr<const ImageInput> altered_image(const ImageInput& image, float delta) {
  auto out = std::make_shared<ImageInput>(image);
  out->pixels = host_copy(image.pixels);
  float* p = out->pixels.ptr<float>();
  for (int64_t i = 0; i < out->pixels.numel(); i++) p[i] += delta;
  out->content_hash = image.content_hash ^ 0x9e3779b97f4a7c15ull;
  return out;
}

GenerationRequest vision_request(const VisionCase& c, int max_tokens) {
  GenerationRequest r;
  r.prompt = c.prompt;
  r.media = c.media;
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  return r;
}

}  // namespace tandem::test
