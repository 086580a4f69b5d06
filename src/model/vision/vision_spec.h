// VisionSpec: what a model says about image input — whether it takes images, and the
// geometry the HTTP side needs to turn an image into a request (media/image_input.h): the
// placeholder token ids and how many soft tokens an image becomes. Plain data: the server
// and the engine read it without knowing the model.
#pragma once

#include <cstdint>
#include <string>

namespace tandem {

enum class VisionFamily : uint8_t {
  None,
  Gemma3,  // SigLIP: every image resized to image_size², a fixed number of soft tokens
  Gemma4,  // patches of any image size, pooled k×k: the soft tokens vary with the size
};

struct VisionSpec {
  bool takes_images = false;
  // Set on a multimodal folder whose towers tandem does not load (Gemma 3n): why images
  // are refused, for the 400 and the load message.
  std::string refusal;
  VisionFamily family = VisionFamily::None;
  // The prompt holds, per image, begin + soft tokens + end; the soft tokens' positions
  // are the MediaSpan. Each id is < the vocabulary.
  int32_t image_token_id = -1;  // the soft-token placeholder
  int32_t boi_token_id = -1;    // begin of image
  int32_t eoi_token_id = -1;    // end of image
  // An image's soft tokens attend to each other both ways in the text model (Gemma 3;
  // Gemma 4 with use_bidirectional_attention "vision"): its tokens are never split
  // across steps, and a prefix-cache hit never ends inside them.
  bool bidirectional = false;
  int patch_size = 0;
  // Gemma 3: the pixels are [3, image_size, image_size]; soft_tokens_per_image each.
  int image_size = 0;
  int soft_tokens_per_image = 0;
  // Gemma 4: pixels [num_patches, 3 · patch_size²], patch positions (x, y) in
  // [0, max_patch_position); k = pooling_kernel_size: every k×k cell of patches becomes
  // one soft token (num_patches = k² · num_soft_tokens).
  int pooling_kernel_size = 0;
  int max_patch_position = 0;
  int hidden_size = 0;  // of the soft tokens (the text model's)
};

const char* vision_family_name(VisionFamily f);

}  // namespace tandem
