#include "cli/image_prompt.h"

#include <fstream>

#include "core/base64.h"
#include "core/error.h"
#include "server/common/chat_prompt.h"
#include "server/common/request_images.h"
#include "server/common/served_images.h"

namespace tandem::cli {
namespace {

using server::ImagePart;

// The file as a data: part (the bytes decide the format), refused before reading when it
// is over --max-image-bytes' default: the same bound the server applies.
ImagePart file_part(const std::string& file) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(file, ec);
  if (ec) fail("--image {}: {}", file, ec.message());
  if (size > MediaLimits{}.max_image_bytes)
    fail("--image {}: {} bytes, over the limit of {} bytes", file, size,
         MediaLimits{}.max_image_bytes);
  std::ifstream in(file, std::ios::binary);
  std::vector<uint8_t> bytes(size);
  if (!in.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(size)))
    fail("--image {}: could not be read", file);
  ImagePart part;
  part.path = "--image " + file;
  part.payload = base64::encode(bytes);
  return part;
}

struct Processed {
  server::ServedImages served;
  std::vector<ProcessedImage> images;
};

Processed process(const ImageFiles& f) {
  if (!f.vision.takes_images)
    fail("--image: {}", f.vision.refusal.empty() ? "the model takes no images" : f.vision.refusal);
  if (!f.tokenizer) fail("--image needs the model's tokenizer.json");
  Processed p;
  p.served = server::load_served_images(f.model_dir, *f.tokenizer, f.vision.takes_images,
                                        f.vision.refusal);
  if (!p.served.takes_images) fail("--image: {}", p.served.refusal);
  std::vector<ImagePart> parts;
  for (const std::string& file : f.files) parts.push_back(file_part(file));
  MediaLimits limits;
  limits.max_images_per_request = std::max<int>(limits.max_images_per_request, int(parts.size()));
  p.images = server::process_request_images(p.served, parts, limits, server::MediaFetchPolicy{});
  return p;
}

}  // namespace

ImagePrompt chat_image_prompt(const ImageFiles& f, const std::string& text) {
  Processed p = process(f);
  auto builder =
      server::ChatPromptBuilder::create(TokenizerConfig::load(f.tokenizer_dir), f.tokenizer);
  if (!builder) fail("--image with --prompt needs a chat template ({})", f.tokenizer_dir.string());
  server::ChatPromptInput input;
  server::Json content = server::Json::array();
  for (size_t i = 0; i < f.files.size(); ++i) content.push_back({{"type", "image"}});
  content.push_back({{"type", "text"}, {"text", text}});
  input.messages.push_back({{"role", "user"}, {"content", std::move(content)}});
  server::RenderedPrompt rendered = builder->render_prompt(input);
  server::expand_image_markers(rendered, *p.served.processor, p.images, "--prompt");
  ImagePrompt out;
  out.ids = builder->tokenize(rendered);
  out.media = server::image_spans(out.ids, p.served.soft_token_id, p.images);
  return out;
}

std::vector<MediaSpan> image_spans_for_ids(const ImageFiles& f, std::span<const int32_t> ids) {
  Processed p = process(f);
  try {
    return server::image_spans(ids, p.served.soft_token_id, p.images);
  } catch (const Error& e) {  // a mismatch is the caller's ids, not tandem's bug, here
    fail("--ids do not hold the images' soft tokens: {}", e.what());
  }
}

}  // namespace tandem::cli
