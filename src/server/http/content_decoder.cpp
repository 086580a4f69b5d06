#include "server/http/content_decoder.h"

#include <brotli/decode.h>
#include <zlib.h>

#include <array>

namespace tandem::server::http {
namespace {

using Status = ContentDecoder::Status;
constexpr size_t kChunk = 64 << 10;

// Appends `n` decoded bytes unless that would pass the cap.
bool append_capped(std::string& out, const char* data, size_t n, size_t max_out) {
  if (n > max_out || out.size() > max_out - n) return false;
  out.append(data, n);
  return true;
}

class IdentityDecoder : public ContentDecoder {
 public:
  Status feed(std::string_view in, std::string& out, size_t max_out) override {
    return append_capped(out, in.data(), in.size(), max_out) ? Status::Ok : Status::TooLarge;
  }
  Status finish() override { return Status::Ok; }
};

// gzip (RFC 1952) or deflate: HTTP's "deflate" is the zlib format (RFC 1950), but some
// clients send a raw deflate stream, which the first two bytes tell apart.
class ZlibDecoder : public ContentDecoder {
 public:
  explicit ZlibDecoder(bool gzip) : gzip_(gzip) {}
  ~ZlibDecoder() override {
    if (started_) inflateEnd(&z_);
  }

  Status feed(std::string_view in, std::string& out, size_t max_out) override {
    if (in.empty()) return Status::Ok;
    if (!started_ && !start(in)) return Status::Corrupt;
    if (ended_) return Status::Corrupt;  // bytes after the end of the stream
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z_.avail_in = uInt(in.size());
    std::array<char, kChunk> buf;
    // A full output buffer may leave more output pending inside zlib: go on until it
    // neither has input left nor filled the buffer.
    do {
      z_.next_out = reinterpret_cast<Bytef*>(buf.data());
      z_.avail_out = uInt(buf.size());
      int r = inflate(&z_, Z_NO_FLUSH);
      if (r != Z_OK && r != Z_STREAM_END && r != Z_BUF_ERROR) return Status::Corrupt;
      if (!append_capped(out, buf.data(), buf.size() - z_.avail_out, max_out))
        return Status::TooLarge;
      ended_ = r == Z_STREAM_END;
      if (r == Z_BUF_ERROR && z_.avail_out == buf.size()) break;  // no progress possible
    } while (!ended_ && (z_.avail_in > 0 || z_.avail_out == 0));
    return z_.avail_in > 0 ? Status::Corrupt : Status::Ok;
  }

  Status finish() override { return !started_ || ended_ ? Status::Ok : Status::Corrupt; }

 private:
  bool start(std::string_view in) {
    int window = 15 + 32;  // gzip or zlib, detected from the header
    if (!gzip_) {
      unsigned b0 = static_cast<unsigned char>(in[0]);
      unsigned b1 = in.size() > 1 ? static_cast<unsigned char>(in[1]) : 0;
      bool zlib_header = (b0 & 0x0F) == 8 && (b0 * 256 + b1) % 31 == 0;
      window = zlib_header ? 15 : -15;
    }
    started_ = inflateInit2(&z_, window) == Z_OK;
    return started_;
  }

  bool gzip_;
  z_stream z_{};
  bool started_ = false;
  bool ended_ = false;
};

class BrotliDecoder : public ContentDecoder {
 public:
  BrotliDecoder() : state_(BrotliDecoderCreateInstance(nullptr, nullptr, nullptr)) {}
  ~BrotliDecoder() override {
    if (state_) BrotliDecoderDestroyInstance(state_);
  }

  Status feed(std::string_view in, std::string& out, size_t max_out) override {
    if (!state_) return Status::Corrupt;
    size_t avail_in = in.size();
    const uint8_t* next_in = reinterpret_cast<const uint8_t*>(in.data());
    std::array<char, kChunk> buf;
    for (;;) {
      size_t avail_out = buf.size();
      uint8_t* next_out = reinterpret_cast<uint8_t*>(buf.data());
      result_ = BrotliDecoderDecompressStream(state_, &avail_in, &next_in, &avail_out, &next_out,
                                              nullptr);
      if (result_ == BROTLI_DECODER_RESULT_ERROR) return Status::Corrupt;
      if (!append_capped(out, buf.data(), buf.size() - avail_out, max_out)) return Status::TooLarge;
      if (result_ == BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT) continue;
      if (result_ == BROTLI_DECODER_RESULT_SUCCESS && avail_in > 0) return Status::Corrupt;
      return Status::Ok;
    }
  }

  Status finish() override {
    return result_ == BROTLI_DECODER_RESULT_SUCCESS ? Status::Ok : Status::Corrupt;
  }

 private:
  BrotliDecoderState* state_;
  BrotliDecoderResult result_ = BROTLI_DECODER_RESULT_NEEDS_MORE_INPUT;
};

}  // namespace

std::unique_ptr<ContentDecoder> ContentDecoder::create(ContentCoding coding) {
  switch (coding) {
    case ContentCoding::Gzip:
      return std::make_unique<ZlibDecoder>(true);
    case ContentCoding::Deflate:
      return std::make_unique<ZlibDecoder>(false);
    case ContentCoding::Brotli:
      return std::make_unique<BrotliDecoder>();
    case ContentCoding::Identity:
      break;
  }
  return std::make_unique<IdentityDecoder>();
}

}  // namespace tandem::server::http
