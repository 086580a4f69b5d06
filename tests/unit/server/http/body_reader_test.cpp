// Body reading without sockets: Content-Length and chunked framing, gzip / deflate (zlib
// and raw) / br decoding, and the limit applied to the decoded size as it is produced —
// a small compressed bomb stops at the limit, a chunked body past it stops at the limit,
// and bytes after the body stay for the next request.
#include <gtest/gtest.h>

#include <brotli/encode.h>
#include <zlib.h>

#include "server/http/body_reader.h"

namespace tandem::server::http {
namespace body_reader_test {

// Hands out `data` in slices of `slice` bytes, then reports Closed; counts what it gave.
class StringSource : public ByteSource {
 public:
  StringSource(std::string data, size_t slice) : data_(std::move(data)), slice_(slice) {}
  Fill fill(std::string& buffer) override {
    if (pos_ >= data_.size()) return Fill::Closed;
    size_t n = std::min(slice_, data_.size() - pos_);
    buffer.append(data_, pos_, n);
    pos_ += n;
    return Fill::Data;
  }
  size_t consumed() const { return pos_; }

 private:
  std::string data_;
  size_t slice_;
  size_t pos_ = 0;
};

std::string zlib_compress(const std::string& in, int window_bits) {
  z_stream z{};
  deflateInit2(&z, 9, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, uLong(in.size())) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = uInt(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = uInt(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string brotli_compress(const std::string& in) {
  size_t size = BrotliEncoderMaxCompressedSize(in.size()) + 64;
  std::string out(size, '\0');
  EXPECT_TRUE(BrotliEncoderCompress(9, 22, BROTLI_MODE_GENERIC, in.size(),
                                    reinterpret_cast<const uint8_t*>(in.data()), &size,
                                    reinterpret_cast<uint8_t*>(out.data())));
  out.resize(size);
  return out;
}

std::string chunked(const std::string& data, size_t chunk) {
  std::string out;
  for (size_t i = 0; i < data.size(); i += chunk) {
    std::string piece = data.substr(i, chunk);
    char size[32];
    snprintf(size, sizeof(size), "%zx;ext=1\r\n", piece.size());
    out += size + piece + "\r\n";
  }
  return out + "0\r\nTrailer: x\r\n\r\n";
}

struct Read {
  BodyStatus status;
  std::string body;
  std::string rest;
  size_t consumed;
};

Read read(const std::string& wire, BodyFraming framing, size_t max_bytes, size_t slice = 7) {
  StringSource source(wire, slice);
  Read r{BodyStatus::Ok, "", "", 0};
  r.status = read_body(source, r.rest, framing, max_bytes, r.body);
  r.consumed = source.consumed();
  return r;
}

BodyFraming length(size_t n, ContentCoding c = ContentCoding::Identity) {
  return {BodyFraming::Kind::Length, n, c, false};
}
BodyFraming chunked_framing(ContentCoding c = ContentCoding::Identity) {
  return {BodyFraming::Kind::Chunked, 0, c, false};
}

const std::string kText =
    R"({"prompt": "a body that compresses: )" + std::string(5000, 'z') + "\"}";

TEST(BodyReader, ContentLengthLeavesTheNextRequestInTheBuffer) {
  Read r = read("hello worldGET / HTTP/1.1\r\n", length(11), 100, 1000);  // one read holds both
  EXPECT_EQ(r.status, BodyStatus::Ok);
  EXPECT_EQ(r.body, "hello world");
  EXPECT_EQ(r.rest.substr(0, 5), "GET /");
}

TEST(BodyReader, EveryCodingDecodesThroughEitherFraming) {
  struct Case {
    ContentCoding coding;
    std::string wire;
  } cases[] = {{ContentCoding::Identity, kText},
               {ContentCoding::Gzip, zlib_compress(kText, 15 + 16)},
               {ContentCoding::Deflate, zlib_compress(kText, 15)},
               {ContentCoding::Deflate, zlib_compress(kText, -15)},  // raw deflate
               {ContentCoding::Brotli, brotli_compress(kText)}};
  for (const Case& c : cases) {
    Read a = read(c.wire, length(c.wire.size(), c.coding), 1 << 20);
    EXPECT_EQ(a.status, BodyStatus::Ok) << int(c.coding);
    EXPECT_EQ(a.body, kText);
    Read b = read(chunked(c.wire, 100), chunked_framing(c.coding), 1 << 20, 3);
    EXPECT_EQ(b.status, BodyStatus::Ok) << int(c.coding);
    EXPECT_EQ(b.body, kText);
  }
}

TEST(BodyReader, ACompressedBombStopsAtTheDecodedLimit) {
  std::string huge(64 << 20, 'a');  // 64 MiB of one letter: a few tens of KB compressed
  for (auto [coding, wire] : {std::pair{ContentCoding::Gzip, zlib_compress(huge, 15 + 16)},
                              std::pair{ContentCoding::Brotli, brotli_compress(huge)}}) {
    ASSERT_LT(wire.size(), 1u << 20);
    Read r = read(wire, length(wire.size(), coding), 1 << 20, 4096);
    EXPECT_EQ(r.status, BodyStatus::TooLarge);
    EXPECT_LE(r.body.size(), 1u << 20);  // never a byte past the limit
  }
}

TEST(BodyReader, AChunkedBodyPastTheLimitStopsThere) {
  std::string wire = chunked(std::string(10 << 20, 'x'), 64 << 10);
  Read r = read(wire, chunked_framing(), 1 << 20, 64 << 10);
  EXPECT_EQ(r.status, BodyStatus::TooLarge);
  EXPECT_LE(r.body.size(), 1u << 20);
  EXPECT_LT(r.consumed, 2u << 20);  // it stopped reading, it did not swallow 10 MiB
}

TEST(BodyReader, AnAnnouncedLengthPastTheLimitIsRefusedUnread) {
  Read r = read(std::string(4096, 'x'), length(2u << 20), 1 << 20);
  EXPECT_EQ(r.status, BodyStatus::TooLarge);
  EXPECT_EQ(r.consumed, 0u);
}

TEST(BodyReader, BrokenFramingAndStreamsAreMalformed) {
  EXPECT_EQ(read("zz\r\nabc\r\n0\r\n\r\n", chunked_framing(), 100).status, BodyStatus::Malformed);
  EXPECT_EQ(read("3\r\nabcX\r\n0\r\n\r\n", chunked_framing(), 100).status, BodyStatus::Malformed);
  EXPECT_EQ(read(std::string(5000, '1') + "\r\n", chunked_framing(), 100).status,
            BodyStatus::Malformed);  // a chunk-size line that never ends
  std::string gz = zlib_compress(kText, 15 + 16);
  std::string cut = gz.substr(0, gz.size() / 2);
  EXPECT_EQ(read(cut, length(cut.size(), ContentCoding::Gzip), 1 << 20).status,
            BodyStatus::Malformed);
  std::string garbage(100, '\x7f');
  EXPECT_EQ(read(garbage, length(garbage.size(), ContentCoding::Gzip), 1 << 20).status,
            BodyStatus::Malformed);
  EXPECT_EQ(read(garbage, length(garbage.size(), ContentCoding::Brotli), 1 << 20).status,
            BodyStatus::Malformed);
}

TEST(BodyReader, AClientThatLeavesMidBodyIsClosed) {
  EXPECT_EQ(read("abc", length(10), 100).status, BodyStatus::Closed);
  EXPECT_EQ(read("5\r\nab", chunked_framing(), 100).status, BodyStatus::Closed);
}

}  // namespace body_reader_test
}  // namespace tandem::server::http
