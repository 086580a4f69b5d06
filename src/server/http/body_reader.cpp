#include "server/http/body_reader.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "server/http/content_decoder.h"

namespace tandem::server::http {
namespace {

constexpr size_t kMaxChunkLine = 4096;  // a chunk-size line with its extensions
constexpr size_t kMaxTrailerBytes = 16 << 10;

// The bytes a body may take on the wire: its decoded limit, plus what an incompressible
// body gains in a coding (gzip adds ~0.03% and a header).
size_t wire_limit(size_t max_bytes) {
  return max_bytes + max_bytes / 64 + 4096;
}

BodyStatus status_of(ByteSource::Fill f) {
  switch (f) {
    case ByteSource::Fill::Closed:
      return BodyStatus::Closed;
    case ByteSource::Fill::Timeout:
      return BodyStatus::Timeout;
    case ByteSource::Fill::Stopped:
      return BodyStatus::Stopped;
    case ByteSource::Fill::Data:
      break;
  }
  return BodyStatus::Ok;
}

BodyStatus status_of(ContentDecoder::Status s) {
  if (s == ContentDecoder::Status::TooLarge) return BodyStatus::TooLarge;
  if (s == ContentDecoder::Status::Corrupt) return BodyStatus::Malformed;
  return BodyStatus::Ok;
}

// A cursor over the connection's bytes: consumes from the front of `buffer` and refills
// it from the source when it runs dry.
class Reader {
 public:
  Reader(ByteSource& source, std::string& buffer) : source_(source), buffer_(buffer) {}
  ~Reader() { buffer_.erase(0, pos_); }

  size_t available() const { return buffer_.size() - pos_; }
  BodyStatus more() {
    if (pos_ > (64 << 10)) {  // keep the buffer from growing with consumed bytes
      buffer_.erase(0, pos_);
      pos_ = 0;
    }
    return status_of(source_.fill(buffer_));
  }
  std::string_view take(size_t n) {
    std::string_view out(buffer_.data() + pos_, std::min(n, available()));
    pos_ += out.size();
    return out;
  }
  // One line without its CRLF (or LF); Malformed past `max_len`.
  BodyStatus line(std::string& out, size_t max_len) {
    for (;;) {
      size_t nl = buffer_.find('\n', pos_);
      if (nl != std::string::npos) {
        if (nl - pos_ > max_len) return BodyStatus::Malformed;
        out.assign(buffer_, pos_, nl - pos_);
        if (!out.empty() && out.back() == '\r') out.pop_back();
        pos_ = nl + 1;
        return BodyStatus::Ok;
      }
      if (available() > max_len) return BodyStatus::Malformed;
      if (BodyStatus s = more(); s != BodyStatus::Ok) return s;
    }
  }

 private:
  ByteSource& source_;
  std::string& buffer_;
  size_t pos_ = 0;
};

// Feeds `n` wire bytes through the decoder.
BodyStatus copy_bytes(Reader& r, uint64_t n, ContentDecoder& decoder, size_t max_bytes,
                      std::string& body) {
  while (n > 0) {
    if (r.available() == 0)
      if (BodyStatus s = r.more(); s != BodyStatus::Ok) return s;
    std::string_view piece = r.take(size_t(std::min<uint64_t>(n, r.available())));
    n -= piece.size();
    if (BodyStatus s = status_of(decoder.feed(piece, body, max_bytes)); s != BodyStatus::Ok)
      return s;
  }
  return BodyStatus::Ok;
}

std::optional<uint64_t> chunk_size(const std::string& line) {
  size_t end = line.find(';');  // chunk extensions are ignored
  std::string_view hex(line.data(), end == std::string::npos ? line.size() : end);
  while (!hex.empty() && (hex.back() == ' ' || hex.back() == '\t')) hex.remove_suffix(1);
  if (hex.empty() || hex.size() > 15) return std::nullopt;
  uint64_t n = 0;
  for (char c : hex) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
    n = n * 16 + uint64_t(std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                                                                      : std::tolower(c) - 'a' + 10);
  }
  return n;
}

BodyStatus read_chunked(Reader& r, ContentDecoder& decoder, size_t max_bytes, std::string& body) {
  uint64_t wire = 0;
  std::string line;
  for (;;) {
    if (BodyStatus s = r.line(line, kMaxChunkLine); s != BodyStatus::Ok) return s;
    std::optional<uint64_t> n = chunk_size(line);
    if (!n) return BodyStatus::Malformed;
    if (*n == 0) break;
    wire += *n;
    if (wire > wire_limit(max_bytes)) return BodyStatus::TooLarge;
    if (BodyStatus s = copy_bytes(r, *n, decoder, max_bytes, body); s != BodyStatus::Ok) return s;
    if (BodyStatus s = r.line(line, 1); s != BodyStatus::Ok) return s;  // the chunk's CRLF
    if (!line.empty()) return BodyStatus::Malformed;
  }
  size_t trailer = 0;  // trailer fields, ignored, up to a blank line
  do {
    if (BodyStatus s = r.line(line, kMaxChunkLine); s != BodyStatus::Ok) return s;
    trailer += line.size();
    if (trailer > kMaxTrailerBytes) return BodyStatus::Malformed;
  } while (!line.empty());
  return BodyStatus::Ok;
}

}  // namespace

BodyStatus read_body(ByteSource& source, std::string& buffer, const BodyFraming& framing,
                     size_t max_bytes, std::string& body) {
  if (framing.kind == BodyFraming::Kind::None) return BodyStatus::Ok;
  if (framing.kind == BodyFraming::Kind::Length && framing.length > wire_limit(max_bytes))
    return BodyStatus::TooLarge;  // refused before a byte of it is read
  if (framing.kind == BodyFraming::Kind::Length && framing.coding == ContentCoding::Identity &&
      framing.length > max_bytes)
    return BodyStatus::TooLarge;
  std::unique_ptr<ContentDecoder> decoder = ContentDecoder::create(framing.coding);
  Reader reader(source, buffer);
  BodyStatus s = framing.kind == BodyFraming::Kind::Chunked
                     ? read_chunked(reader, *decoder, max_bytes, body)
                     : copy_bytes(reader, framing.length, *decoder, max_bytes, body);
  if (s != BodyStatus::Ok) return s;
  return status_of(decoder->finish());
}

}  // namespace tandem::server::http
