// libFuzzer target: the transport's parsers on arbitrary bytes — the request head (line,
// headers, framing, codings) and then the body as that head describes it, decoded from
// the rest of the input under a small limit. Invariants: neither throws; a decoded body
// never passes the limit; whatever follows the body is left in the buffer.
#include <algorithm>
#include <string>
#include <string_view>

#include "fuzz_common.h"
#include "server/http/body_reader.h"
#include "server/http/request_head.h"

namespace {

using namespace tandem::server::http;

class Source : public ByteSource {
 public:
  explicit Source(std::string_view data) : data_(data) {}
  Fill fill(std::string& buffer) override {
    if (data_.empty()) return Fill::Closed;
    size_t n = std::min<size_t>(data_.size(), 1 + data_.size() % 97);
    buffer.append(data_.substr(0, n));
    data_.remove_prefix(n);
    return Fill::Data;
  }

 private:
  std::string_view data_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::optional<size_t> end = find_head_end(in);
  if (!end) return 0;
  auto parsed = parse_request_head(in.substr(0, *end));
  auto* head = std::get_if<RequestHead>(&parsed);
  if (!head) return 0;
  constexpr size_t kLimit = 64 << 10;
  std::string rest(in.substr(*end, std::min<size_t>(in.size() - *end, 13)));
  Source source(in.substr(*end + rest.size()));
  std::string body;
  BodyStatus s = read_body(source, rest, head->body, kLimit, body);
  if (body.size() > kLimit) tandem::fuzz::fail("a body passed its limit", std::to_string(body.size()));
  (void)s;
  return 0;
}
