// WebP through libwebp's animation decoder, the way PIL's WebPImagePlugin reads every WebP
// (still or animated): the first frame rendered on the canvas in RGBA (areas it does not
// cover transparent black), then convert("RGB") drops the alpha.
#include <webp/decode.h>
#include <webp/demux.h>

#include <memory>

#include "media/decoders.h"
#include "media/media_error.h"

namespace tandem::media_detail {
namespace {

struct AnimDecoderDeleter {
  void operator()(WebPAnimDecoder* d) const { WebPAnimDecoderDelete(d); }
};

const char* status_text(VP8StatusCode status) {
  switch (status) {
    case VP8_STATUS_NOT_ENOUGH_DATA: return "file is truncated";
    case VP8_STATUS_BITSTREAM_ERROR: return "bitstream error";
    case VP8_STATUS_UNSUPPORTED_FEATURE: return "unsupported feature";
    case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
    default: return "invalid data";
  }
}

std::string chunk(const WebPDemuxer* demux, const char fourcc[4]) {
  WebPChunkIterator it;
  std::string out;
  if (WebPDemuxGetChunk(demux, fourcc, 1, &it)) {
    out.assign(reinterpret_cast<const char*>(it.chunk.bytes), it.chunk.size);
    WebPDemuxReleaseChunkIterator(&it);
  }
  return out;
}

}  // namespace

DecodedFrame decode_webp(std::span<const uint8_t> bytes, const MediaLimits& limits) {
  // The header alone gives the canvas size: checked before libwebp allocates it.
  WebPBitstreamFeatures features;
  const VP8StatusCode status = WebPGetFeatures(bytes.data(), bytes.size(), &features);
  if (status != VP8_STATUS_OK) {
    media_fail(MediaErrorKind::kCorrupt, "WebP image is corrupt: {}", status_text(status));
  }
  check_image_size("WebP", uint64_t(features.width), uint64_t(features.height), limits);

  WebPAnimDecoderOptions options;
  WebPAnimDecoderOptionsInit(&options);
  options.color_mode = MODE_RGBA;  // PIL's choice: straight (not premultiplied) alpha
  options.use_threads = 0;
  const WebPData data{bytes.data(), bytes.size()};
  std::unique_ptr<WebPAnimDecoder, AnimDecoderDeleter> decoder(WebPAnimDecoderNew(&data, &options));
  if (!decoder) media_fail(MediaErrorKind::kCorrupt, "WebP image is corrupt: invalid container");
  WebPAnimInfo info;
  if (!WebPAnimDecoderGetInfo(decoder.get(), &info)) {
    media_fail(MediaErrorKind::kCorrupt, "WebP image is corrupt: no animation info");
  }
  check_image_size("WebP", info.canvas_width, info.canvas_height, limits);
  uint8_t* rgba = nullptr;
  int timestamp = 0;
  if (!WebPAnimDecoderGetNext(decoder.get(), &rgba, &timestamp) || !rgba) {
    media_fail(MediaErrorKind::kCorrupt, "WebP image is corrupt: its first frame does not decode");
  }
  DecodedFrame frame;
  frame.rgb = RgbImage(int(info.canvas_width), int(info.canvas_height));
  const size_t num_pixels = size_t(info.canvas_width) * info.canvas_height;
  for (size_t i = 0; i < num_pixels; ++i) {
    frame.rgb.pixels[3 * i + 0] = rgba[4 * i + 0];
    frame.rgb.pixels[3 * i + 1] = rgba[4 * i + 1];
    frame.rgb.pixels[3 * i + 2] = rgba[4 * i + 2];
  }
  const WebPDemuxer* demux = WebPAnimDecoderGetDemuxer(decoder.get());
  const std::string exif = chunk(demux, "EXIF");
  frame.exif.assign(exif.begin(), exif.end());
  frame.xmp = chunk(demux, "XMP ");
  return frame;
}

}  // namespace tandem::media_detail
