#include "media/processor_config.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "media/media_error.h"

namespace fs = std::filesystem;

namespace tandem {
namespace {

constexpr int kMaxSize = 16384;  // a resize target past this is a broken config

// Typed, bounded reads of one JSON object, each failure naming the file and key. A key that
// is absent or null keeps the caller's default (transformers treats null as "unset").
class Fields {
 public:
  Fields(const nlohmann::json& j, const std::string& source) : j_(j), source_(source) {}

  bool has(const char* key) const {
    return j_.is_object() && j_.contains(key) && !j_[key].is_null();
  }

  void get(const char* key, bool& out) const {
    if (!has(key)) return;
    if (!j_[key].is_boolean()) bad(key, "a boolean");
    out = j_[key].get<bool>();
  }
  void get(const char* key, int& out, int lo, int hi) const {
    if (!has(key)) return;
    if (!j_[key].is_number_integer()) bad(key, "an integer");
    const int64_t v = j_[key].get<int64_t>();
    if (v < lo || v > hi) bad(key, fmt::format("between {} and {}", lo, hi));
    out = int(v);
  }
  void get(const char* key, double& out, double lo, double hi) const {
    if (!has(key)) return;
    if (!j_[key].is_number()) bad(key, "a number");
    const double v = j_[key].get<double>();
    if (!(v >= lo && v <= hi)) bad(key, fmt::format("between {} and {}", lo, hi));
    out = v;
  }
  // A number or a list of three (image_mean, image_std).
  void get(const char* key, std::array<float, 3>& out) const {
    if (!has(key)) return;
    const nlohmann::json& v = j_[key];
    if (v.is_number()) {
      out.fill(float(v.get<double>()));
      return;
    }
    if (!v.is_array() || v.size() != 3) bad(key, "a number or a list of 3 numbers");
    for (size_t i = 0; i < 3; ++i) {
      if (!v[i].is_number()) bad(key, "a number or a list of 3 numbers");
      out[i] = float(v[i].get<double>());
    }
  }
  const nlohmann::json& raw(const char* key) const { return j_[key]; }
  [[noreturn]] void bad(const char* key, const std::string& what) const {
    media_fail(MediaErrorKind::kConfig, "{}: '{}' must be {} (got {})", source_, key, what,
               j_[key].dump());
  }

 private:
  const nlohmann::json& j_;
  const std::string& source_;
};

// A string field of an object, or "" (for a null, absent or non-string value).
std::string string_field(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

ImageProcessorKind detect_kind(const nlohmann::json& image_processor,
                               const nlohmann::json& processor, const std::string& source) {
  std::string type = string_field(image_processor, "image_processor_type");
  if (type.empty()) type = string_field(image_processor, "processor_class");
  if (type.empty()) type = string_field(processor, "processor_class");
  if (type.starts_with("Gemma3ImageProcessor") || type == "Gemma3Processor") {
    return ImageProcessorKind::kGemma3;
  }
  if (type.starts_with("Gemma4ImageProcessor") || type == "Gemma4Processor") {
    return ImageProcessorKind::kGemma4;
  }
  media_fail(MediaErrorKind::kConfig,
             "{}: image processor '{}' is not supported (tandem has Gemma 3's and Gemma 4's)",
             source, type.empty() ? "(none named)" : type);
}

// Gemma3ImageProcessorPil's keys: a fixed size, optional pan-and-scan.
void read_gemma3(const Fields& f, const nlohmann::json& processor, const nlohmann::json& model,
                 ImageProcessorConfig& c) {
  if (f.has("size")) {
    const nlohmann::json& size = f.raw("size");
    if (size.is_number_integer()) {  // default_to_square
      f.get("size", c.height, 1, kMaxSize);
      c.width = c.height;
    } else {
      if (!size.is_object() || !size.contains("height") || !size.contains("width")) {
        f.bad("size", "{\"height\": H, \"width\": W} (Gemma 3 resizes to a fixed size)");
      }
      Fields(size, c.source).get("height", c.height, 1, kMaxSize);
      Fields(size, c.source).get("width", c.width, 1, kMaxSize);
    }
  }
  PanAndScanConfig& p = c.pan_and_scan;
  f.get("do_pan_and_scan", p.enabled);
  f.get("pan_and_scan_min_crop_size", p.min_crop_size, 1, kMaxSize);
  f.get("pan_and_scan_max_num_crops", p.max_num_crops, 1, 64);
  f.get("pan_and_scan_min_ratio_to_activate", p.min_ratio_to_activate, 0.0, 1e9);
  // Soft tokens per image: the processor's image_seq_length, else the model's
  // mm_tokens_per_image, else Gemma3Processor's default.
  Fields(model, c.source).get("mm_tokens_per_image", c.image_seq_length, 1, 1 << 20);
  f.get("image_seq_length", c.image_seq_length, 1, 1 << 20);
  Fields(processor, c.source).get("image_seq_length", c.image_seq_length, 1, 1 << 20);
}

// Gemma4ImageProcessorPil's keys.
void read_gemma4(const Fields& f, ImageProcessorConfig& c) {
  f.get("patch_size", c.patch_size, 1, 1024);
  f.get("pooling_kernel_size", c.pooling_kernel_size, 1, 64);
  f.get("max_soft_tokens", c.max_soft_tokens, 1, 1 << 20);
  const int supported[] = {70, 140, 280, 560, 1120};
  if (std::find(std::begin(supported), std::end(supported), c.max_soft_tokens) ==
      std::end(supported)) {
    f.bad("max_soft_tokens", "one of 70, 140, 280, 560, 1120");
  }
}

}  // namespace

nlohmann::json read_json_or_empty(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return nlohmann::json::object();
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) media_fail(MediaErrorKind::kConfig, "{}: cannot read", path.string());
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    media_fail(MediaErrorKind::kConfig, "{}: not a JSON object", path.string());
  }
  return j;
}

ImageProcessorConfig parse_image_processor_config(const nlohmann::json& image_processor,
                                                  const nlohmann::json& processor,
                                                  const nlohmann::json& model,
                                                  const std::string& source) {
  ImageProcessorConfig c;
  c.source = source;
  c.kind = detect_kind(image_processor, processor, source);
  const bool gemma3 = c.kind == ImageProcessorKind::kGemma3;
  // The class defaults (Gemma 3: bilinear, normalize to [-1, 1]; Gemma 4: bicubic, [0, 1]).
  c.resample = gemma3 ? ResampleFilter::kBilinear : ResampleFilter::kBicubic;
  c.do_normalize = gemma3;
  c.image_mean = gemma3 ? std::array<float, 3>{0.5f, 0.5f, 0.5f} : std::array<float, 3>{};
  c.image_std = gemma3 ? std::array<float, 3>{0.5f, 0.5f, 0.5f}
                       : std::array<float, 3>{1.0f, 1.0f, 1.0f};
  const Fields f(image_processor, c.source);
  f.get("do_resize", c.do_resize);
  int resample = int(c.resample);
  f.get("resample", resample, 0, 5);
  c.resample = *resample_filter_from_pil(resample);
  f.get("do_rescale", c.do_rescale);
  f.get("rescale_factor", c.rescale_factor, -1e9, 1e9);
  f.get("do_normalize", c.do_normalize);
  f.get("image_mean", c.image_mean);
  f.get("image_std", c.image_std);
  if (gemma3) {
    read_gemma3(f, processor, model, c);
  } else {
    read_gemma4(f, c);
  }
  return c;
}

ImageProcessorConfig read_image_processor_config(const fs::path& model_dir) {
  const fs::path processor_path = model_dir / "processor_config.json";
  const fs::path flat_path = model_dir / "preprocessor_config.json";
  const nlohmann::json processor = read_json_or_empty(processor_path);
  const nlohmann::json model = read_json_or_empty(model_dir / "config.json");
  if (processor.contains("image_processor")) {
    if (!processor["image_processor"].is_object()) {
      media_fail(MediaErrorKind::kConfig, "{}: 'image_processor' must be an object",
                 processor_path.string());
    }
    return parse_image_processor_config(processor["image_processor"], processor, model,
                                        processor_path.string());
  }
  std::error_code ec;
  if (!fs::exists(flat_path, ec)) {
    media_fail(MediaErrorKind::kConfig,
               "{}: no image processor settings (neither processor_config.json with "
               "'image_processor' nor preprocessor_config.json)",
               model_dir.string());
  }
  return parse_image_processor_config(read_json_or_empty(flat_path), processor, model,
                                      flat_path.string());
}

}  // namespace tandem
