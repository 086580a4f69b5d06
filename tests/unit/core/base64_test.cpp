// core/base64: RFC 4648's test vectors both ways, every byte value round-tripping, and the
// strict decoder's refusals (what data: URLs and Anthropic's base64 sources are held to).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/base64.h"

namespace tandem {
namespace base64_test {

std::vector<uint8_t> bytes_of(std::string_view s) {
  return {s.begin(), s.end()};
}

TEST(Base64, Rfc4648Vectors) {
  const std::pair<const char*, const char*> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (auto [plain, encoded] : vectors) {
    EXPECT_EQ(base64::encode(bytes_of(plain)), encoded);
    auto decoded = base64::decode(encoded);
    ASSERT_TRUE(decoded) << encoded;
    EXPECT_EQ(*decoded, bytes_of(plain));
    EXPECT_EQ(base64::decoded_size(encoded), std::string_view(plain).size());
  }
}

TEST(Base64, EveryByteRoundTripsAtEveryLength) {
  std::vector<uint8_t> all;
  for (int i = 0; i < 256; ++i) all.push_back(uint8_t(255 - i));
  for (size_t n : {size_t(1), size_t(2), size_t(3), size_t(254), size_t(255), size_t(256)}) {
    std::vector<uint8_t> in(all.begin(), all.begin() + long(n));
    std::string text = base64::encode(in);
    EXPECT_EQ(text.size() % 4, 0u);
    EXPECT_EQ(base64::decoded_size(text), n);
    EXPECT_EQ(base64::decode(text).value(), in);
  }
}

TEST(Base64, MissingPaddingIsForgiven) {
  EXPECT_EQ(base64::decode("Zg").value(), bytes_of("f"));
  EXPECT_EQ(base64::decode("Zm8").value(), bytes_of("fo"));
  EXPECT_EQ(base64::decoded_size("Zm8"), 2u);
}

TEST(Base64, MalformedInputIsRefusedWithWhere) {
  std::string why;
  EXPECT_FALSE(base64::decode("Zm9v YmFy", &why));  // whitespace
  EXPECT_NE(why.find("offset 4"), std::string::npos) << why;
  EXPECT_FALSE(base64::decode("Zm9v*mFy", &why));
  EXPECT_NE(why.find("0x2a"), std::string::npos) << why;
  EXPECT_FALSE(base64::decode("Zm=9v", &why));  // '=' mid-text
  EXPECT_FALSE(base64::decode("Zm9vY", &why));  // 5 characters: not whole bytes
  EXPECT_NE(why.find("truncated"), std::string::npos) << why;
  EXPECT_FALSE(base64::decode("Zg===", &why));     // too much padding
  EXPECT_FALSE(base64::decode("Zm9v=", &why));     // padding after a whole group
  EXPECT_FALSE(base64::decode("Zm8==", &why));     // "Zm8" takes one '=', not two
  EXPECT_FALSE(base64::decode("Zm9v-_==", &why));  // the URL-safe alphabet is not this one
}

}  // namespace base64_test
}  // namespace tandem
